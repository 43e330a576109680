package verdict

import (
	"slices"
	"testing"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
)

var hour10 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

// cronjobs is one API removed in 1.25, called by ci (last at 10:00) and
// helm (last at 12:00), and batch/v2alpha1 none.
func cronjobs() sunsetv1.APIRequestCountList {
	obj := sunsetv1.APIRequestCount{}
	obj.Metadata.Name = "cronjobs.v1beta1.batch"
	obj.Status.RemovedInRelease = "1.25"
	obj.Status.Window = &sunsetv1.Window{RequestCount: 7, ClientCount: 2, ByUser: []sunsetv1.WindowUser{
		{UserName: "ci", RequestCount: 5, UserAgents: []string{"kubectl/v1.24.0"}, LastSeen: hour10},
		{UserName: "helm", RequestCount: 2, UserAgents: []string{"helm/v3.14.0", "helm/v3.15.1"}, LastSeen: hour10.Add(2 * time.Hour)},
	}}
	return sunsetv1.APIRequestCountList{Items: []sunsetv1.APIRequestCount{obj}}
}

func TestStoppedAtTheExactHour(t *testing.T) {
	// The 10:00 hour ends at 11:00; silent for 6h at 17:00, not a
	// nanosecond before.
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{
		{hour10.Add(7*time.Hour - time.Nanosecond), false},
		{hour10.Add(7 * time.Hour), true},
		{time.Time{}, false},
	} {
		if got := Stopped(hour10, tc.now, 6*time.Hour); got != tc.want {
			t.Errorf("Stopped(10:00, %s, 6h) = %v, want %v", tc.now, got, tc.want)
		}
	}
	if Stopped(time.Time{}, hour10.Add(100*time.Hour), 6*time.Hour) {
		t.Error("a caller whose last call is unknown counted as stopped")
	}
	if Stopped(hour10, hour10.Add(100*time.Hour), 0) {
		t.Error("a caller counted as stopped without a cleanFor")
	}
}

func TestCleanForClearsAFindingOnlyWhenEveryCallerStopped(t *testing.T) {
	target := catalog.MustParseRelease("1.37")
	o := CheckOptions{Target: target, Since: 24 * time.Hour, CleanFor: 6 * time.Hour, Now: hour10.Add(7 * time.Hour)}
	res := Check(cronjobs(), o)
	f := res.Findings[0]
	if res.ExitCode != sunsetv1.ExitCodeRemoved || f.Accepted || res.StoppedCallers != 1 || !f.Callers[0].Stopped || f.Callers[1].Stopped {
		t.Fatalf("at 17:00: exit %d, accepted %v, stopped %d, callers %+v", res.ExitCode, f.Accepted, res.StoppedCallers, f.Callers)
	}
	o.Now = hour10.Add(9 * time.Hour) // helm's 12:00 hour ended 6h ago
	res = Check(cronjobs(), o)
	want := "Safe to upgrade to 1.37: no deprecated API was requested in the last 24h. 1 API requested not counted: every caller has been silent for 6h."
	if res.ExitCode != sunsetv1.ExitCodeSafe || !res.Findings[0].Accepted || res.StoppedCallers != 2 || res.Message != want || res.CleanFor != "6h" {
		t.Fatalf("at 19:00: exit %d, accepted %v, stopped %d, cleanFor %q, message %q", res.ExitCode, res.Findings[0].Accepted, res.StoppedCallers, res.CleanFor, res.Message)
	}
	if res.Findings[0].Severity != sunsetv1.SeverityRemoved || !slices.Equal(res.Findings[0].Clients, []string{"ci", "helm"}) {
		t.Errorf("severity %q clients %v; both stay as they were", res.Findings[0].Severity, res.Findings[0].Clients)
	}
}

func TestCallersBeyondThoseListedKeepItNotSafe(t *testing.T) {
	list := cronjobs()
	list.Items[0].Status.Window.ClientCount = 3
	res := Check(list, CheckOptions{Target: catalog.MustParseRelease("1.37"), Since: 24 * time.Hour, CleanFor: time.Hour, Now: hour10.Add(100 * time.Hour)})
	if res.ExitCode != sunsetv1.ExitCodeRemoved || res.Findings[0].Accepted || res.StoppedCallers != 2 {
		t.Fatalf("exit %d accepted %v stopped %d; a third, unlisted caller may still call", res.ExitCode, res.Findings[0].Accepted, res.StoppedCallers)
	}
}

func TestExemptionsExpireAtTheExactInstant(t *testing.T) {
	expires := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ex := []sunsetv1.Exemption{
		{API: "cronjobs.v1beta1.batch", UserName: "ci", Reason: "migrating in CHG-1", Expires: expires},
		{API: "cronjobs.v1beta1.batch", UserAgent: "helm/*", Reason: "chart 2.0 pending", Expires: expires},
		{API: "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io", Reason: "gone already", Expires: expires},
	}
	o := CheckOptions{Target: catalog.MustParseRelease("1.37"), Since: 24 * time.Hour, Exemptions: ex, Now: expires.Add(-time.Nanosecond)}
	res := Check(cronjobs(), o)
	f := res.Findings[0]
	if res.ExitCode != sunsetv1.ExitCodeSafe || !f.Accepted || f.Callers[0].Exemption == nil || f.Callers[0].Exemption.Reason != "migrating in CHG-1" ||
		f.Callers[1].Exemption == nil || f.Callers[1].Exemption.Reason != "chart 2.0 pending" {
		t.Fatalf("before expiry: exit %d accepted %v callers %+v", res.ExitCode, f.Accepted, f.Callers)
	}
	if len(res.Exemptions) != 3 || len(res.ExpiredExemptions) != 0 || len(res.StaleExemptions) != 1 || res.StaleExemptions[0].API != "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io" {
		t.Fatalf("exemptions %d expired %d stale %+v", len(res.Exemptions), len(res.ExpiredExemptions), res.StaleExemptions)
	}
	want := "Safe to upgrade to 1.37: no deprecated API was requested in the last 24h. 1 API requested not counted: every caller is exempted. 1 exemption matched no request."
	if res.Message != want {
		t.Errorf("message\n%q, want\n%q", res.Message, want)
	}
	o.Now = expires
	res = Check(cronjobs(), o)
	if res.ExitCode != sunsetv1.ExitCodeRemoved || res.Findings[0].Accepted || res.Findings[0].Callers[0].Exemption != nil ||
		len(res.Exemptions) != 0 || len(res.ExpiredExemptions) != 3 || len(res.StaleExemptions) != 0 {
		t.Fatalf("at expiry: exit %d accepted %v active %d expired %d stale %d", res.ExitCode, res.Findings[0].Accepted,
			len(res.Exemptions), len(res.ExpiredExemptions), len(res.StaleExemptions))
	}
}

func TestAUserAgentExemptionNeedsEveryAgentOfTheCaller(t *testing.T) {
	ex := []sunsetv1.Exemption{{API: "cronjobs.v1beta1.batch", UserAgent: "helm/v3.14.0", Reason: "r", Expires: hour10.Add(time.Hour)}}
	res := Check(cronjobs(), CheckOptions{Target: catalog.MustParseRelease("1.37"), Since: 24 * time.Hour, Exemptions: ex, Now: hour10})
	if c := res.Findings[0].Callers[1]; c.Exemption != nil || res.ExitCode != sunsetv1.ExitCodeRemoved || len(res.StaleExemptions) != 1 {
		t.Fatalf("helm also called with helm/v3.15.1, yet exemption %+v, exit %d, stale %d", c.Exemption, res.ExitCode, len(res.StaleExemptions))
	}
}

func TestAnAPIWideExemptionAcceptsUnlistedCallers(t *testing.T) {
	list := cronjobs()
	list.Items[0].Status.Window.ClientCount = 40
	ex := []sunsetv1.Exemption{{API: "cronjobs.v1beta1.batch", Reason: "r", Expires: hour10.Add(time.Hour)}}
	res := Check(list, CheckOptions{Target: catalog.MustParseRelease("1.37"), Since: 24 * time.Hour, Exemptions: ex, Now: hour10})
	if res.ExitCode != sunsetv1.ExitCodeSafe || !res.Findings[0].Accepted {
		t.Fatalf("exit %d accepted %v", res.ExitCode, res.Findings[0].Accepted)
	}
}

func TestStepsNameEveryReleaseThatBreaks(t *testing.T) {
	list := cronjobs()
	list.Items[0].Status.RemovedInRelease = "1.35"
	second := list.Items[0]
	second.Metadata.Name = "ingresses.v1beta1.networking.k8s.io"
	second.Status.RemovedInRelease = "1.37"
	third := second
	third.Metadata.Name = "leases.v1beta1.coordination.k8s.io"
	third.Status.RemovedInRelease = "1.38"
	list.Items = append(list.Items, second, third)
	res := Check(list, CheckOptions{Target: catalog.MustParseRelease("1.37"), From: catalog.MustParseRelease("1.34"), Since: 24 * time.Hour})
	want := []sunsetv1.Step{
		{Release: "1.35", ExitCode: sunsetv1.ExitCodeRemoved, Findings: []string{"cronjobs.v1beta1.batch"}},
		{Release: "1.37", ExitCode: sunsetv1.ExitCodeRemoved, Findings: []string{"ingresses.v1beta1.networking.k8s.io"}},
	}
	if res.From != "1.34" || res.FirstBreaking != "1.35" || !slices.EqualFunc(res.Steps, want, func(a, b sunsetv1.Step) bool {
		return a.Release == b.Release && a.ExitCode == b.ExitCode && slices.Equal(a.Findings, b.Findings)
	}) {
		t.Fatalf("from %q first %q steps %+v", res.From, res.FirstBreaking, res.Steps)
	}
	wantMsg := "NOT SAFE to upgrade to 1.37: 2 APIs removed in or before 1.37 were requested in the last 24h. Upgrading from 1.34, the first release that breaks is 1.35; breaking at each: 1.35 (cronjobs.v1beta1.batch); 1.37 (ingresses.v1beta1.networking.k8s.io)."
	if res.Message != wantMsg {
		t.Errorf("message\n%q, want\n%q", res.Message, wantMsg)
	}
	if res = Check(list, CheckOptions{Target: catalog.MustParseRelease("1.37"), Since: 24 * time.Hour}); res.Steps != nil || res.From != "" {
		t.Errorf("without From: steps %+v", res.Steps)
	}
}
