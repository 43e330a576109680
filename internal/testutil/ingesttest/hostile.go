package ingesttest

import (
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// maxIPBytes bounds a sourceIPs entry as the decoder does: the longest
// IPv6 address with a zone is under it.
const maxIPBytes = 64

// HostileEvents are audit events of hostile lengths, as fuzz seeds of
// every input that decodes events: long lists, long values, many
// annotations, a removed release that is not one.
func HostileEvents() []string {
	many := func(entry string, n int) string { return strings.TrimSuffix(strings.Repeat(entry, n), ",") }
	return []string{
		`{"auditID":"h1","stage":"ResponseComplete","sourceIPs":["10.0.0.1",` + many(`"",`, 5000) + `,"192.0.2.7"]}`,
		`{"auditID":"h2","stage":"ResponseComplete","sourceIPs":[` + many(`"10.0.0.1",`, 50) + `,"x"]}`,
		`{"auditID":"h3","stage":"ResponseComplete","user":{"username":"` + strings.Repeat("u", 3000) + `","groups":[` + many(`"g",`, 5000) + `],` +
			`"extra":{"authentication.kubernetes.io/pod-name":[` + many(`"p",`, 3000) + `]}}}`,
		`{"auditID":"h4","stage":"ResponseComplete","objectRef":{"resource":"endpoints","apiVersion":"v1"},"annotations":{"k8s.io/deprecated":"true",` +
			`"k8s.io/removed-release":"` + strings.Repeat("1", 100) + `.37"}}`,
		`{"auditID":"h5","stage":"ResponseComplete","objectRef":{"resource":"endpoints","apiVersion":"v1"},"annotations":{"k8s.io/deprecated":"true",` +
			`"k8s.io/removed-release":"banana"}}`,
		`{"auditID":"h6","stage":"ResponseComplete","annotations":{` + many(`"failed-open.validating.webhook.admission.k8s.io/round_0_index_0":"w",`, 2000) + `}}`,
		`{"auditID":"h7","stage":"ResponseComplete","userAgent":"` + strings.Repeat("\\u00e9", 1000) + `","verb":"` + strings.Repeat("v", 100) + `"}`,
		`{"auditID":"` + strings.Repeat("i", 3000) + `","stage":"ResponseComplete","requestURI":"/api?dryRun=All&x=` + strings.Repeat("a", 9000) + `"}`,
		`{"auditID":"` + strings.Repeat("\\u0069", 300) + `","stage":"ResponseComplete","requestReceivedTimestamp":"2026-11-24T10:00:00.` + strings.Repeat("0", 100) + `Z"}`,
		`{"auditID":"h10","stage":"ResponseComplete","kind":"` + strings.Repeat("k", 3000) + `","apiVersion":"` + strings.Repeat("v", 3000) + `"}`,
		`{"auditID":"h11","stage":"ResponseComplete","verb":"delete","requestObject":{"kind":"DeleteOptions","dryRun":["All"],"x":"` + strings.Repeat("o", 5000) + `"}}`,
	}
}

// CheckBounds fails t unless every string and list of ev is within the
// bound the decoder promises, and what it kept of each is valid.
func CheckBounds(t testing.TB, ev classify.Event) {
	t.Helper()
	for _, s := range []struct {
		name  string
		value string
		max   int
	}{
		{"stage", ev.Stage, countkey.MaxVerbBytes},
		{"verb", ev.Verb, countkey.MaxVerbBytes},
		{"username", ev.Username, countkey.MaxUsernameBytes},
		{"impersonatedBy", ev.ImpersonatedBy, countkey.MaxUsernameBytes},
		{"userAgent", ev.UserAgent, countkey.MaxUserAgentBytes},
		{"podName", ev.PodName, countkey.MaxNodeBytes},
		{"podNode", ev.PodNode, countkey.MaxNodeBytes},
		{"removedRelease", ev.RemovedRelease, countkey.MaxReleaseBytes},
	} {
		if len(s.value) > s.max {
			t.Fatalf("%s is %d bytes, over %d", s.name, len(s.value), s.max)
		}
	}
	if len(ev.ID) > countkey.MaxIDBytes {
		t.Fatalf("auditID is %d bytes, over %d", len(ev.ID), countkey.MaxIDBytes)
	}
	if r := ev.RemovedRelease; r != "" {
		if _, err := catalog.ParseRelease(r); err != nil {
			t.Fatalf("removedRelease %q is not a release", r)
		}
	}
	if len(ev.SourceIPs) > countkey.MaxSourceIPs {
		t.Fatalf("%d sourceIPs, over %d", len(ev.SourceIPs), countkey.MaxSourceIPs)
	}
	for _, ip := range ev.SourceIPs {
		if _, err := netip.ParseAddr(ip); err != nil || len(ip) > maxIPBytes {
			t.Fatalf("sourceIPs holds %q", ip)
		}
	}
	if ref := ev.ObjectRef; ref != nil {
		for _, s := range []struct {
			value string
			max   int
		}{
			{ref.Group, countkey.MaxGroupBytes}, {ref.Version, countkey.MaxVersionBytes},
			{ref.Resource, countkey.MaxResourceBytes}, {ref.Subresource, countkey.MaxSubresourceBytes},
		} {
			if len(s.value) > s.max+utf8.UTFMax {
				t.Fatalf("an objectRef part is %d bytes", len(s.value))
			}
		}
	}
	if f := ev.Admission; f != nil {
		if len(f.Calls) > admission.MaxCallsPerRequest || len(f.Certificates) > admission.MaxHostsPerRequest {
			t.Fatalf("%d webhook calls, %d hosts", len(f.Calls), len(f.Certificates))
		}
	}
}
