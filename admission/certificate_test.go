package admission

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every shape of testdata/certificate-events.jsonl (see its README), line
// by line.
func TestParseCertificateShapes(t *testing.T) {
	events, lines := readEvents(t, "testdata/certificate-events.jsonl")
	legacy := CertificateIssue{Problem: InsecureSHA1, Host: "legacy-injector.legacy.svc"}
	want := []*Facts{
		{Calls: []Call{{Type: Mutating, Configuration: "legacy-injector", Webhook: "inject.legacy.example.com", FailedOpen: true}},
			Certificates: []CertificateIssue{legacy}},
		{Calls: []Call{}, Certificates: []CertificateIssue{{Problem: MissingSAN, Host: "policy.example.com"}}},
		{Calls: []Call{
			{Type: Mutating, Configuration: "legacy-injector", Webhook: "inject.legacy.example.com", Mutated: true},
			{Type: Mutating, Configuration: "labels", Webhook: "labels.example.com", Index: 1},
		}, Certificates: []CertificateIssue{{Problem: InsecureSHA1, Host: "10.96.0.15"}, legacy}},
		{Calls: []Call{{Type: Validating, Webhook: "validate.widgets.example.com", FailedOpen: true}},
			Certificates: []CertificateIssue{{Problem: InsecureSHA1, Host: "widget-validator.widgets.svc"}}},
		nil, // RequestReceived
		{Calls: []Call{}, Certificates: []CertificateIssue{{Problem: MissingSAN, Host: "ok.example.com"}}, Invalid: 4},
	}
	require.Len(t, events, len(want))
	for i, e := range events {
		require.Equal(t, want[i], Parse(e.Annotations), "line %d (%s)", i+1, e.AuditID)
		require.Equal(t, want[i] != nil, MayHave(lines[i]), "pre-filter of line %d", i+1)
	}
}

// Two events captured from kube-apiserver v1.36.3 by the end-to-end test:
// a configmap create whose two webhooks (a mutating one on a server with a
// SHA-1-signed certificate, a validating one on a server without SAN)
// failed open, and a secret create refused with a 500 by a validating
// webhook on the SHA-1 server.
func TestParseCapturedCertificateEvents(t *testing.T) {
	events, lines := readEvents(t, "testdata/certificate-captured.jsonl")
	sha1 := CertificateIssue{Problem: InsecureSHA1, Host: "127.0.0.1"}
	require.Equal(t, []*Facts{
		{Calls: []Call{
			{Type: Mutating, Configuration: "e2e-sha1-injector", Webhook: "inject.sha1.e2e.example.com", FailedOpen: true},
			{Type: Validating, Webhook: "policy.nosan.e2e.example.com", FailedOpen: true},
		}, Certificates: []CertificateIssue{sha1, {Problem: MissingSAN, Host: "localhost"}}},
		{Calls: []Call{}, Certificates: []CertificateIssue{sha1}},
	}, []*Facts{Parse(events[0].Annotations), Parse(events[1].Annotations)})
	for i := range lines {
		require.True(t, MayHave(lines[i]), "pre-filter of line %d", i+1)
	}
}

// The pre-filter finds the certificate keys alone, which do not say
// "webhook", in an event's annotations as in a whole body.
func TestMayHaveCertificateKeys(t *testing.T) {
	for _, raw := range []string{
		`{"missing-san.invalid-cert.kubernetes.io/policy.example.com":"relies on a legacy Common Name field instead of the SAN extension for subject validation"}`,
		`{"items":[{"annotations":{"insecure-sha1.invalid-cert.kubernetes.io/10.0.0.1":"uses an insecure SHA-1 signature"}}]}`,
	} {
		require.True(t, MayHave([]byte(raw)), raw)
	}
	require.False(t, MayHave([]byte(`{"authorization.k8s.io/decision":"allow","note":"a webhook"}`)))
}

// One event may name at most MaxHostsPerRequest servers; the rest are
// invalid, not dropped silently.
func TestParseBoundsHosts(t *testing.T) {
	ann := map[string]json.RawMessage{}
	for i := range MaxHostsPerRequest + 5 {
		ann[InsecureSHA1Prefix+"h"+strconv.Itoa(i)+".example.com"] = json.RawMessage(`"uses an insecure SHA-1 signature"`)
	}
	f := Parse(ann)
	require.Len(t, f.Certificates, MaxHostsPerRequest)
	require.Equal(t, 5, f.Invalid)
}

func TestCertificateRules(t *testing.T) {
	sha1, ok := RuleOf(InsecureSHA1)
	require.True(t, ok)
	require.Equal(t, CertificateRule{Problem: InsecureSHA1, Reason: "uses an insecure SHA-1 signature",
		DefaultRefusedIn: "1.24", GODEBUG: "x509sha1=1", RefusedIn: "1.33"}, sha1)
	san, ok := RuleOf(MissingSAN)
	require.True(t, ok)
	require.Equal(t, "1.23", san.RefusedIn)
	require.Equal(t, "1.19", san.DefaultRefusedIn)
	_, ok = RuleOf("expired")
	require.False(t, ok)
}

// A row without a webhook name holds a server's certificate problems: it
// takes no webhook label under the cap.
func TestLabelsLeaveCertificateRowsOut(t *testing.T) {
	l := NewLabels(LabelOptions{MaxWebhooks: 1})
	require.Equal(t, WebhookID{Configuration: "legacy-injector.legacy.svc"}, l.Webhook(WebhookID{Configuration: "legacy-injector.legacy.svc"}))
	require.Equal(t, WebhookID{"a", "a.example.com"}, l.Webhook(WebhookID{"a", "a.example.com"}))
	require.Equal(t, WebhookID{Webhook: Other}, l.Webhook(WebhookID{"b", "b.example.com"}))
	_, folded := l.Folded()
	require.Equal(t, 1, folded)
}
