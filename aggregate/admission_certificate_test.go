package aggregate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// The certificate shapes (admission/testdata/README.md), counted by hand:
// a row per server and problem beside the webhooks' rows, counted once per
// request, and the counter behind the alert.
func TestAdmissionCountsCertificateShapes(t *testing.T) {
	a, st, reg := newAdmissionTest(t)
	events := decodeLines(t, "../admission/testdata/certificate-events.jsonl")
	origin := classify.Origin{Source: "webhook", Cluster: "prod", Node: "master-0"}
	sum, err := a.Ingest(context.Background(), origin, events)
	require.NoError(t, err)
	require.Equal(t, &classify.AdmissionSummary{Counted: 5}, sum.Admission)
	// Line 4 is also a deprecated API's request.
	require.Equal(t, 1, sum.Counted)

	hour := time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)
	key := func(group, version, resource, typ, configuration, webhook string) countkey.AdmissionKey {
		return countkey.AdmissionKey{Hour: hour, Cluster: "prod", Group: group, Version: version, Resource: resource,
			Type: typ, Configuration: configuration, Webhook: webhook}
	}
	want := map[countkey.AdmissionKey]countkey.AdmissionCounts{
		// Lines 1 and 3.
		key("", "v1", "pods", "", "", ""):                                                 {Requests: 2, Calls: 3, Mutations: 1, FailedOpen: 1},
		key("", "v1", "pods", "mutating", "legacy-injector", "inject.legacy.example.com"): {Requests: 2, Calls: 2, Mutations: 1, FailedOpen: 1},
		key("", "v1", "pods", "mutating", "labels", "labels.example.com"):                 {Requests: 1, Calls: 1},
		key("", "v1", "pods", "insecure-sha1", "legacy-injector.legacy.svc", ""):          {Requests: 2},
		key("", "v1", "pods", "insecure-sha1", "10.96.0.15", ""):                          {Requests: 1},
		// Line 2: a request with no webhook call annotated still counts.
		key("", "v1", "configmaps", "", "", ""):                                                           {Requests: 1},
		key("", "v1", "configmaps", "missing-san", "policy.example.com", ""):                              {Requests: 1},
		key("e2e.example.com", "v1beta1", "widgets", "", "", ""):                                          {Requests: 1, Calls: 1, FailedOpen: 1},
		key("e2e.example.com", "v1beta1", "widgets", "validating", "", "validate.widgets.example.com"):    {Requests: 1, Calls: 1, FailedOpen: 1},
		key("e2e.example.com", "v1beta1", "widgets", "insecure-sha1", "widget-validator.widgets.svc", ""): {Requests: 1},
		// Line 6: only the good key.
		key("", "v1", "secrets", "", "", ""):                          {Requests: 1},
		key("", "v1", "secrets", "missing-san", "ok.example.com", ""): {Requests: 1},
	}
	require.Equal(t, want, scanAdmission(t, st))

	// A retry: duplicates, nothing added, the counter unchanged.
	sum, err = a.Ingest(context.Background(), origin, events)
	require.NoError(t, err)
	require.Equal(t, &classify.AdmissionSummary{Duplicates: 5}, sum.Admission)
	require.Equal(t, want, scanAdmission(t, st))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_admission_annotations_invalid_total Admission webhook annotations that could not be read and were left out.
# TYPE sunset_admission_annotations_invalid_total counter
sunset_admission_annotations_invalid_total 8
# HELP sunset_admission_webhook_certificate_problems_total Webhook servers whose serving certificate kube-apiserver flagged, one per newly counted request and server, by problem: insecure-sha1 (a SHA-1 signature) or missing-san (no subjectAltName). Current kube-apiserver releases refuse both.
# TYPE sunset_admission_webhook_certificate_problems_total counter
sunset_admission_webhook_certificate_problems_total{cluster="prod",problem="insecure-sha1"} 4
sunset_admission_webhook_certificate_problems_total{cluster="prod",problem="missing-san"} 2
`), "sunset_admission_annotations_invalid_total", "sunset_admission_webhook_certificate_problems_total"))
}

// A cluster's series exist at zero from its first request with webhook
// annotations on, before any certificate is flagged.
func TestCertificateCounterStartsAtZero(t *testing.T) {
	a, _, reg := newAdmissionTest(t)
	events := decodeLines(t, "../admission/testdata/crafted-events.jsonl")
	_, err := a.Ingest(context.Background(), classify.Origin{Source: "webhook", Cluster: "dev", Node: "n"}, events)
	require.NoError(t, err)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_admission_webhook_certificate_problems_total Webhook servers whose serving certificate kube-apiserver flagged, one per newly counted request and server, by problem: insecure-sha1 (a SHA-1 signature) or missing-san (no subjectAltName). Current kube-apiserver releases refuse both.
# TYPE sunset_admission_webhook_certificate_problems_total counter
sunset_admission_webhook_certificate_problems_total{cluster="dev",problem="insecure-sha1"} 0
sunset_admission_webhook_certificate_problems_total{cluster="dev",problem="missing-san"} 0
`), "sunset_admission_webhook_certificate_problems_total"))
}
