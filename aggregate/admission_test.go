package aggregate_test

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/store"
)

// testNow is the clock of the captured traffic, minutes after its last
// event.
var testNow = ingesttest.CapturedNow

func newAdmissionTest(t *testing.T) (*aggregate.Aggregator, *store.Store, *prometheus.Registry) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return testNow }})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	a := aggregate.New(aggregate.Options{Store: st, Logger: zerolog.Nop(), Registerer: reg, Now: func() time.Time { return testNow },
		Admission: aggregate.AdmissionOptions{
			Resolver: admission.NewResolver([]admission.WebhookID{{Configuration: "vault", Webhook: "vault-validator.example.com"}}),
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })
	return a, st, reg
}

func decodeLines(t *testing.T, path string) []classify.Event {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []classify.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		ev, err := auditjson.DecodeEvent(sc.Bytes())
		require.NoError(t, err)
		out = append(out, ev)
	}
	require.NoError(t, sc.Err())
	return out
}

func scanAdmission(t *testing.T, st *store.Store) map[countkey.AdmissionKey]countkey.AdmissionCounts {
	t.Helper()
	got := map[countkey.AdmissionKey]countkey.AdmissionCounts{}
	require.NoError(t, st.ScanAdmission(testNow.Add(-48*time.Hour), testNow, func(k countkey.AdmissionKey, c countkey.AdmissionCounts) error {
		got[k] = c
		return nil
	}))
	return got
}

// buckets builds the bucket array with one request in bucket i.
func bucket(i int) [countkey.AdmissionBuckets]uint64 {
	var b [countkey.AdmissionBuckets]uint64
	b[i] = 1
	return b
}

// The crafted shapes (admission/testdata/README.md), counted by hand: per
// resource a totals row, and a row per webhook called.
func TestAdmissionCountsCraftedShapes(t *testing.T) {
	a, st, reg := newAdmissionTest(t)
	events := decodeLines(t, "../admission/testdata/crafted-events.jsonl")
	origin := classify.Origin{Source: "file", Cluster: "prod", Node: "master-0"}
	sum, err := a.Ingest(context.Background(), origin, events)
	require.NoError(t, err)
	require.Equal(t, &classify.AdmissionSummary{Counted: 6}, sum.Admission)

	hour := time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)
	key := func(group, version, resource, typ, configuration, webhook string) countkey.AdmissionKey {
		return countkey.AdmissionKey{Hour: hour, Cluster: "prod", Group: group, Version: version, Resource: resource,
			Type: typ, Configuration: configuration, Webhook: webhook}
	}
	const sec = uint64(time.Second)
	want := map[countkey.AdmissionKey]countkey.AdmissionCounts{
		// Line 2 (1.7 s + 20.5 ms) and line 8 (its latency unreadable).
		key("", "v1", "pods", "", "", ""): {Requests: 2, Calls: 4, Mutations: 2, Slow: 1, LatencyNanos: 1720500000, Buckets: bucket(2)},
		key("", "v1", "pods", "mutating", "istio-sidecar-injector", "sidecar-injector.istio.io"): {Requests: 1, Calls: 2, Mutations: 1,
			Slow: 1, LatencyNanos: 17 * sec / 10, Buckets: bucket(2)},
		key("", "v1", "pods", "mutating", "pod-defaults", "defaults.pods.example.com"): {Requests: 1, Calls: 1,
			Slow: 1, LatencyNanos: 17 * sec / 10, Buckets: bucket(2)},
		key("", "v1", "pods", "mutating", "good", "good.example.com"): {Requests: 1, Calls: 1, Mutations: 1},
		// The configuration comes from the resolver: the annotation has none.
		key("", "v1", "secrets", "", "", ""): {Requests: 1, Calls: 1, FailedOpen: 1, Slow: 1, LatencyNanos: 102 * sec / 10, Buckets: bucket(5)},
		key("", "v1", "secrets", "validating", "vault", "vault-validator.example.com"): {Requests: 1, Calls: 1, FailedOpen: 1,
			Slow: 1, LatencyNanos: 102 * sec / 10, Buckets: bucket(5)},
		key("", "v1", "configmaps", "", "", ""): {Requests: 1, Calls: 1, FailedOpen: 1, Slow: 1, LatencyNanos: 3 * sec, Buckets: bucket(3)},
		key("", "v1", "configmaps", "mutating", "defaulter", "defaults.example.com"): {Requests: 1, Calls: 1, FailedOpen: 1,
			Slow: 1, LatencyNanos: 3 * sec, Buckets: bucket(3)},
		key("authentication.k8s.io", "v1", "tokenreviews", "", "", ""):                                            {Requests: 1, Calls: 1},
		key("authentication.k8s.io", "v1", "tokenreviews", "mutating", "token-audit", "tokens.audit.example.com"): {Requests: 1, Calls: 1},
		key("apps", "v1", "deployments", "", "", ""):                                                              {Requests: 1, Calls: 1, Mutations: 1, Slow: 1, LatencyNanos: 8 * sec / 10, Buckets: bucket(1)},
		key("apps", "v1", "deployments", "mutating", "labeler", "labels.example.com"): {Requests: 1, Calls: 1, Mutations: 1,
			Slow: 1, LatencyNanos: 8 * sec / 10, Buckets: bucket(1)},
	}
	require.Equal(t, want, scanAdmission(t, st))

	// Sent again (an apiserver retry): nothing changes.
	sum, err = a.Ingest(context.Background(), origin, events)
	require.NoError(t, err)
	require.Equal(t, &classify.AdmissionSummary{Duplicates: 6}, sum.Admission)
	require.Equal(t, want, scanAdmission(t, st))

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_admission_annotations_invalid_total Admission webhook annotations that could not be read and were left out.
# TYPE sunset_admission_annotations_invalid_total counter
sunset_admission_annotations_invalid_total 8
# HELP sunset_admission_events_total Requests with admission webhook annotations, by source and what became of them (counted, duplicate).
# TYPE sunset_admission_events_total counter
sunset_admission_events_total{result="counted",source="file"} 6
sunset_admission_events_total{result="duplicate",source="file"} 6
`), "sunset_admission_annotations_invalid_total", "sunset_admission_events_total"))

	// One observation per slowed request, all webhooks together.
	require.Equal(t, 4, testutil.CollectAndCount(reg, "sunset_admission_webhook_latency_seconds"))
	count, sumSeconds := histogram(t, reg, "secrets")
	require.Equal(t, uint64(1), count)
	require.InDelta(t, 10.2, sumSeconds, 1e-9)
}

func histogram(t *testing.T, reg *prometheus.Registry, resource string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "sunset_admission_webhook_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["resource"] == resource {
				require.Equal(t, map[string]string{"cluster": "prod", "group": "", "version": "v1", "resource": resource,
					"subresource": "", "class": "security"}, labels)
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	t.Fatalf("no histogram for %s", resource)
	return 0, 0
}

// A request that is both deprecated and seen by a webhook (the captured
// widgets v1beta1 creates through the slow e2e-mutator) counts once in each
// counter, and a retry is a duplicate in each. The marks are independent:
// a request the deprecation counter already had (counted by a Sunset
// without the admission counter) still counts for webhooks.
func TestDeprecatedAndWebhookRequestCountsOnceInEachCounter(t *testing.T) {
	a, st, _ := newAdmissionTest(t)
	var both []classify.Event
	for _, ev := range decodeLines(t, "../testdata/apiserver-v1.36/request-level-blocking/audit-log-file.jsonl") {
		if ev.Deprecated && ev.Admission != nil {
			both = append(both, ev)
		}
	}
	require.Len(t, both, 6)
	origin := classify.Origin{Source: "webhook", Cluster: "c", Node: "n"}
	ctx := context.Background()

	sum, err := a.Ingest(ctx, origin, both[:1])
	require.NoError(t, err)
	require.Equal(t, 1, sum.Counted)
	require.Equal(t, &classify.AdmissionSummary{Counted: 1}, sum.Admission)
	sum, err = a.Ingest(ctx, origin, both[:1])
	require.NoError(t, err)
	require.Equal(t, 0, sum.Counted)
	require.Equal(t, 1, sum.Duplicates)
	require.Equal(t, &classify.AdmissionSummary{Duplicates: 1}, sum.Admission)

	withoutFacts := both[1]
	withoutFacts.Admission = nil
	sum, err = a.Ingest(ctx, origin, []classify.Event{withoutFacts})
	require.NoError(t, err)
	require.Equal(t, 1, sum.Counted)
	require.Nil(t, sum.Admission)
	sum, err = a.Ingest(ctx, origin, both[1:])
	require.NoError(t, err)
	require.Equal(t, 4, sum.Counted)
	require.Equal(t, 1, sum.Duplicates)
	require.Equal(t, &classify.AdmissionSummary{Counted: 5}, sum.Admission)

	var deprecated uint64
	require.NoError(t, st.ScanCounts("c", "widgets.v1beta1.e2e.example.com", testNow.Add(-48*time.Hour), testNow,
		func(_ countkey.CountKey, n uint64) error { deprecated += n; return nil }))
	require.Equal(t, uint64(6), deprecated)
	rows := scanAdmission(t, st)
	require.Len(t, rows, 2)
	var total countkey.AdmissionCounts
	for k, c := range rows {
		if k.IsTotal() {
			total = c
		}
	}
	require.Equal(t, uint64(6), total.Requests)
	require.Equal(t, uint64(6), total.Calls)
	require.Equal(t, uint64(6), total.Slow)
	require.Equal(t, uint64(6), total.Buckets[2])
}

// A dry run says what the admission counter would do and stores nothing.
func TestAdmissionPlan(t *testing.T) {
	a, st, _ := newAdmissionTest(t)
	events := decodeLines(t, "../admission/testdata/crafted-events.jsonl")
	origin := classify.Origin{Source: "webhook", Cluster: "prod", Node: "n"}
	results := func() []classify.Result {
		planned, err := a.Plan(origin, append(events, events[1]))
		require.NoError(t, err)
		var out []classify.Result
		for _, p := range planned {
			out = append(out, p.Admission)
		}
		return out
	}
	c, d := classify.ResultCounted, classify.ResultDuplicate
	require.Equal(t, []classify.Result{"", c, c, c, c, c, "", c, d}, results())
	require.Empty(t, scanAdmission(t, st))
	_, err := a.Ingest(context.Background(), origin, events[:3])
	require.NoError(t, err)
	require.Equal(t, []classify.Result{"", d, d, c, c, c, "", c, d}, results())
}
