package app_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// postCheckFixture sends what cmd/sunset's tests use for `sunset check`:
// the captured bodies on master-0, an already-removed batch/v1beta1 CronJob
// client on prod/master-1, and a storage v1beta1 client (removed in 1.37)
// on master-2 at 07:00.
func postCheckFixture(s *server) {
	s.t.Helper()
	s.postCaptured("/audit/webhook/master-0")
	cron := func(id, verb, at string) map[string]any {
		return ev(id, "verb", verb, "user", map[string]any{"username": "system:serviceaccount:ci:deployer"}, "userAgent", "helm/v3.14.0 (linux)",
			"objectRef", map[string]any{"resource": "cronjobs", "apiGroup": "batch", "apiVersion": "v1beta1", "namespace": "ci"},
			"responseStatus", map[string]any{"code": 404}, "annotations", nil, "requestReceivedTimestamp", at)
	}
	code, _ := s.post("/audit/webhook/prod/master-1", "application/json", eventList(cron("cj-1", "list", "2026-11-21T18:05:00Z"), cron("cj-2", "create", "2026-11-21T19:05:00Z")))
	require.Equal(s.t, 200, code)
	code, _ = s.post("/audit/webhook/master-2", "application/json", eventList(ev("vac-1", "verb", "get", "user", map[string]any{"username": "carol"}, "userAgent", "terraform/1.9.0",
		"objectRef", map[string]any{"resource": "volumeattributesclasses", "apiGroup": "storage.k8s.io", "apiVersion": "v1beta1"},
		"requestReceivedTimestamp", "2026-11-21T07:00:00Z", "annotations", map[string]any{"k8s.io/deprecated": "true", "k8s.io/removed-release": "1.37"})))
	require.Equal(s.t, 200, code)
}

func getJSON[T any](t *testing.T, s *server, path string) T {
	t.Helper()
	code, body := s.get(path)
	require.Equal(t, 200, code, string(body))
	var out T
	require.NoError(t, json.Unmarshal(body, &out))
	return out
}

func TestUpgradeChecksAndServerInfo(t *testing.T) {
	s := start(t, testConfig(t))
	postCheckFixture(s)
	const base = "/apis/sunset.dev/v1/"

	code, body := s.get(base + "serverinfo")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"apiVersion":"sunset.dev/v1","kind":"ServerInfo","time":"2026-11-21T19:50:00Z","retention":"720h0m0s","clusters":["default","prod"]}`, string(body))

	// The status is what `sunset check -o json` prints for the same data.
	want, err := os.ReadFile("../cmd/sunset/testdata/check-json.golden")
	require.NoError(t, err)
	one := getJSON[sunsetv1.UpgradeCheck](t, s, base+"upgradechecks/v1.37.0?since=48h")
	require.Equal(t, "UpgradeCheck", one.Kind)
	require.Equal(t, "1.37", one.Metadata.Name)
	got, err := json.Marshal(one.Status)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))

	// Every release that removes an API, by the catalog, oldest first,
	// each the same as asked alone; 24h and system users excluded by
	// default.
	list := getJSON[sunsetv1.UpgradeCheckList](t, s, base+"upgradechecks")
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
		alone := getJSON[sunsetv1.UpgradeCheck](t, s, base+"upgradechecks/"+it.Metadata.Name+"?since=24h&excludeSystem=true")
		require.Equal(t, alone, it)
	}
	require.Equal(t, []string{"1.16", "1.21", "1.22", "1.24", "1.25", "1.26", "1.27", "1.29", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36",
		"1.37", "1.38", "1.39", "1.40", "1.42", "1.43"}, names)
	require.Equal(t, "NOT SAFE to upgrade to 1.16: 1 API removed in or before 1.16 was requested in the last 24h, system users excluded.", list.Items[0].Status.Message)
	require.Equal(t, "NOT SAFE to upgrade to 1.43: 2 APIs removed in or before 1.43 were requested in the last 24h, system users excluded.", list.Items[19].Status.Message)

	// System traffic counts on request; the cluster filter applies.
	withSystem := getJSON[sunsetv1.UpgradeCheck](t, s, base+"upgradechecks/1.36?excludeSystem=false&cluster=default&warningsAsErrors=true")
	require.Equal(t, sunsetv1.CheckResult{TargetVersion: "1.36", Since: "24h", ExitCode: sunsetv1.ExitCodeDeprecated,
		Message: "FAILED (--warnings-as-errors): no API removed in or before 1.36 was requested in the last 24h, but 5 deprecated APIs were.",
		Findings: []sunsetv1.Finding{
			{Name: "volumeattributesclasses.v1beta1.storage.k8s.io", Severity: "deprecated", RemovedIn: "1.37", Requests: 1, ClientCount: 1, Clients: []string{"carol"}, Callers: []sunsetv1.Caller{caller("carol", 7, "terraform/1.9.0")},
				Warning: "storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass"},
			{Name: "componentstatuses.v1", Severity: "deprecated", Requests: 2, ClientCount: 1, Clients: []string{"admin"},
				Callers: []sunsetv1.Caller{caller("admin", 19, "find-deprecated/1.0", "kubectl/v1.32.4")}, Warning: "v1 ComponentStatus is deprecated in v1.19+"},
			{Name: "endpoints.v1", Severity: "deprecated", Requests: 35, ClientCount: 4, Clients: []string{"system:apiserver", "alice", "admin", "bob"},
				Callers: []sunsetv1.Caller{caller("system:apiserver", 19, "kube-apiserver/v1.36.3"), caller("alice", 19, "kubectl/v1.32.4"),
					caller("admin", 19, "find-deprecated/1.0"), caller("bob", 19, "bob-script/2.0")},
				Warning: "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"},
			{Name: "widgets.v1alpha1.e2e.example.com", Severity: "deprecated", Requests: 1, ClientCount: 1, Clients: []string{"bob"},
				Callers: []sunsetv1.Caller{caller("bob", 19, "bob-script/2.0")}, Warning: "e2e.example.com/v1alpha1 widgets is deprecated"},
			{Name: "widgets.v1beta1.e2e.example.com", Severity: "deprecated", Requests: 28, ClientCount: 2, Clients: []string{"alice", "bob"},
				Callers: []sunsetv1.Caller{caller("alice", 19, "kubectl/v1.32.4"), caller("bob", 19, "bob-script/2.0", "curl/7.88.1")}, Warning: "e2e.example.com/v1beta1 widgets is deprecated"},
		}}, withSystem.Status)

	for path, msg := range map[string]string{
		"upgradechecks?excludeSystem=maybe&since=30m": `excludeSystem "maybe" is not true or false; since "30m" is not a duration of at least 1h, such as 24h or 168h`,
		"upgradechecks/1.37?user=alice":               `unknown parameter "user" (known: cleanFor, cluster, excludeSystem, from, since, warningsAsErrors)`,
		"upgradechecks?since=721h":                    `since 721h0m0s is longer than the retention of 720h0m0s`,
		"upgradechecks?cleanFor=90m&from=one":         `cleanFor "90m" is not whole hours; counts are hourly (1h or 2h); from: "one" is not a Kubernetes release such as 1.37`,
		"upgradechecks/1.37?from=1.37":                `from 1.37 is not before the target 1.37`,
	} {
		code, body := s.get(base + path)
		require.Equal(t, 400, code, path)
		require.JSONEq(t, statusBody(400, "BadRequest", msg), string(body), path)
	}
	code, body = s.get(base + "upgradechecks/next")
	require.Equal(t, 404, code)
	require.JSONEq(t, statusBody(404, "NotFound", `upgradechecks "next" not found: name a target release such as 1.37`), string(body))
	code, _ = s.post(base+"upgradechecks", "application/json", []byte("{}"))
	require.Equal(t, 405, code)
}

// caller is one caller of the fixture, last seen in the hour of 2026-11-21
// the captured bodies or postCheckFixture put it in.
func caller(name string, hour int, agents ...string) sunsetv1.Caller {
	return sunsetv1.Caller{UserName: name, UserAgents: agents, LastSeen: time.Date(2026, 11, 21, hour, 0, 0, 0, time.UTC)}
}

// ?cleanFor= treats a caller as stopped once its last hour ended that long
// before the server's clock (19:50); ?from= names the releases on the way
// that break.
func TestUpgradeCheckCleanForAndFrom(t *testing.T) {
	s := start(t, testConfig(t))
	postCheckFixture(s)
	const base = "/apis/sunset.dev/v1/upgradechecks/"

	// carol's 07:00 hour ended at 08:00: silent 11h50m at 19:50.
	busy := getJSON[sunsetv1.UpgradeCheck](t, s, base+"1.37?since=48h&cleanFor=12h&from=1.34").Status
	require.Equal(t, "12h", busy.CleanFor)
	require.Equal(t, 0, busy.StoppedCallers)
	require.Equal(t, []sunsetv1.Step{{Release: "1.37", ExitCode: sunsetv1.ExitCodeRemoved, Findings: []string{"volumeattributesclasses.v1beta1.storage.k8s.io"}}}, busy.Steps)
	require.Equal(t, "1.37", busy.FirstBreaking)
	require.Equal(t, "NOT SAFE to upgrade to 1.37: 2 APIs removed in or before 1.37 were requested in the last 48h, system users excluded. "+
		"Upgrading from 1.34, the first release that breaks is 1.37; breaking at each: 1.37 (volumeattributesclasses.v1beta1.storage.k8s.io).", busy.Message)

	quiet := getJSON[sunsetv1.UpgradeCheck](t, s, base+"1.37?since=48h&cleanFor=11h&from=1.34").Status
	require.Equal(t, 1, quiet.StoppedCallers)
	vac := quiet.Findings[1]
	require.Equal(t, "volumeattributesclasses.v1beta1.storage.k8s.io", vac.Name)
	require.True(t, vac.Accepted)
	require.Equal(t, []sunsetv1.Caller{{UserName: "carol", UserAgents: []string{"terraform/1.9.0"}, LastSeen: time.Date(2026, 11, 21, 7, 0, 0, 0, time.UTC), Stopped: true}}, vac.Callers)
	require.Equal(t, sunsetv1.ExitCodeRemoved, quiet.ExitCode, "the CronJob client still calls")
	require.Empty(t, quiet.Steps)
	require.Equal(t, "NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 48h, system users excluded. "+
		"1 API requested not counted: every caller has been silent for 11h. Upgrading from 1.34, no release up to 1.37 removes anything still requested.", quiet.Message)
}

// ?hourly=true lists the window's hours with requests; they add up to the
// window and agree with last24h.
func TestHourlyWindow(t *testing.T) {
	s := start(t, testConfig(t))
	postCheckFixture(s)
	code, _ := s.post("/audit/webhook/master-0", "application/json", eventList(
		ev("weekly-1", "requestReceivedTimestamp", "2026-11-18T03:00:00Z", "verb", "create", "requestURI", "/api/v1/namespaces/default/endpoints?dryRun=All"),
		ev("weekly-2", "requestReceivedTimestamp", "2026-11-18T03:59:59Z")))
	require.Equal(t, 200, code)

	obj := getAPI(t, s, "endpoints.v1?since=168h&hourly=true")
	require.Equal(t, []sunsetv1.HourCount{
		{Hour: time.Date(2026, 11, 18, 3, 0, 0, 0, time.UTC), RequestCount: 2, DryRunCount: 1},
		{Hour: time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC), RequestCount: 35, SystemRequestCount: 27, DryRunCount: 1},
	}, obj.Status.Window.ByHour)
	var sum int64
	for _, h := range obj.Status.Window.ByHour {
		sum += h.RequestCount
	}
	require.Equal(t, obj.Status.Window.RequestCount, sum)
	require.Equal(t, obj.Status.Last24h[19].RequestCount, obj.Status.Window.ByHour[1].RequestCount)
	require.Equal(t, obj.Status.Last24h[19].DryRunCount, obj.Status.Window.ByHour[1].DryRunCount)

	cron := getAPI(t, s, "cronjobs.v1beta1.batch?since=24h&hourly=true")
	require.Equal(t, []sunsetv1.HourCount{
		{Hour: time.Date(2026, 11, 21, 18, 0, 0, 0, time.UTC), RequestCount: 1, RemovedRequestCount: 1},
		{Hour: time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC), RequestCount: 1, RemovedRequestCount: 1},
	}, cron.Status.Window.ByHour)

	list := getJSON[sunsetv1.APIRequestCountList](t, s, "/apis/sunset.dev/v1/apirequestcounts?since=24h&hourly=1")
	for _, it := range list.Items {
		single := getAPI(t, s, it.Metadata.Name+"?since=24h&hourly=true")
		require.Equal(t, single.Status.Window.ByHour, it.Status.Window.ByHour, it.Metadata.Name)
	}
	require.Nil(t, getAPI(t, s, "endpoints.v1?since=24h").Status.Window.ByHour, "only on request")

	for path, msg := range map[string]string{
		"/endpoints.v1?hourly=true":          `hourly needs since: the hours listed are those of the window, e.g. since=168h`,
		"?hourly=yes&since=24h":              `hourly "yes" is not true or false`,
		"/endpoints.v1?hourly=false&since=x": `since "x" is not a duration of at least 1h, such as 24h or 168h`,
	} {
		code, body := s.get("/apis/sunset.dev/v1/apirequestcounts" + path)
		require.Equal(t, 400, code, path)
		require.JSONEq(t, statusBody(400, "BadRequest", msg), string(body), path)
	}
}
