package aggregate_test

import (
	"bufio"
	"context"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/store"
)

// falcoEvents decodes the Falco sample line by line, as a log replay would.
// It returns the events that decoded and how many lines did not.
func falcoEvents(t *testing.T) ([]classify.Event, int) {
	t.Helper()
	f, err := os.Open("../testdata/public/falco-k8s_audit-trace_files.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var events []classify.Event
	bad := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		ev, err := auditjson.DecodeEvent(sc.Bytes())
		if err != nil {
			bad++
			continue
		}
		events = append(events, ev)
	}
	require.NoError(t, sc.Err())
	return events, bad
}

func runAggregator(t *testing.T, now time.Time, versions map[string]catalog.Release) (*aggregate.Aggregator, *store.Store) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Retention: 10 * 365 * 24 * time.Hour, Now: func() time.Time { return now }})
	require.NoError(t, err)
	a := aggregate.New(aggregate.Options{Store: st, Logger: zerolog.Nop(), Now: func() time.Time { return now }, ClusterVersions: versions})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })
	return a, st
}

func TestFalcoSampleCountsOnlyWithAClusterVersion(t *testing.T) {
	events, bad := falcoEvents(t)
	// 38 without apiVersion, 4 audit.k8s.io/v1 and 9 v1beta1 events
	// decode; the malformed line does not.
	require.Len(t, events, 51)
	require.Equal(t, 1, bad)
	now := time.Date(2018, 10, 27, 0, 0, 0, 0, time.UTC)
	origin := classify.Origin{Source: "file", Cluster: "minikube", Node: "minikube"}

	a, _ := runAggregator(t, now, nil)
	sum, err := a.Ingest(context.Background(), origin, events)
	require.NoError(t, err)
	require.Equal(t, classify.Summary{Skipped: 51, SkippedBy: map[string]int{"not_deprecated": 49, "skipped_stage": 2}}, sum,
		"without a version nothing in 2018 was annotated")

	a, st := runAggregator(t, now, map[string]catalog.Release{"minikube": catalog.MustParseRelease("1.15")})
	sum, err = a.Ingest(context.Background(), origin, events)
	require.NoError(t, err)
	require.Equal(t, classify.Summary{Counted: 2, Skipped: 49, SkippedBy: map[string]int{"not_deprecated": 47, "skipped_stage": 2}}, sum)
	require.Equal(t, []store.APIInfo{{Cluster: "minikube", API: "deployments.v1beta1.extensions", RemovedRelease: "1.16",
		FirstHour: time.Date(2018, 10, 26, 13, 0, 0, 0, time.UTC), LastHour: time.Date(2018, 10, 26, 13, 0, 0, 0, time.UTC),
		Nodes: map[string]time.Time{"minikube": time.Date(2018, 10, 26, 13, 0, 0, 0, time.UTC)},
		// One commit, of an hour long before the store's: both versions.
		Versions: store.Versions{Writes: 1, Past: 1}}}, st.APIs())
	verbs := map[string]uint64{}
	require.NoError(t, st.ScanCounts("minikube", "deployments.v1beta1.extensions", time.Time{}, now, func(k countkey.CountKey, n uint64) error {
		require.False(t, k.Removed)
		verbs[k.Verb] += n
		return nil
	}))
	require.Equal(t, map[string]uint64{"create": 1, "delete": 1}, verbs)
}

func TestCatalogClassification(t *testing.T) {
	now := ingesttest.CapturedNow
	ev := func(id, group, version, resource string, code int32, annotated bool) classify.Event {
		return classify.Event{ID: id, Stage: classify.StageResponseComplete, Verb: "get", Username: "alice",
			ObjectRef: &classify.ObjectRef{Group: group, Version: version, Resource: resource}, ResponseCode: code,
			Deprecated: annotated, RequestReceived: now}
	}
	tests := []struct {
		name     string
		versions map[string]catalog.Release
		event    classify.Event
		counted  bool
		removed  bool
		release  string
	}{
		{"404 to a removed API", nil, ev("1", "extensions", "v1beta1", "ingresses", 404, false), true, true, "1.22"},
		{"404 on a cluster that still serves it", map[string]catalog.Release{"c": {Major: 1, Minor: 21}}, ev("2", "extensions", "v1beta1", "ingresses", 404, false), true, false, "1.22"},
		{"404 on a cluster that removed it", map[string]catalog.Release{"c": {Major: 1, Minor: 22}}, ev("3", "extensions", "v1beta1", "ingresses", 404, false), true, true, "1.22"},
		{"200 from a removed API without version", nil, ev("4", "extensions", "v1beta1", "ingresses", 200, false), false, false, ""},
		{"unannotated deprecated API, version known", map[string]catalog.Release{"c": {Major: 1, Minor: 30}}, ev("5", "flowcontrol.apiserver.k8s.io", "v1beta3", "flowschemas", 200, false), true, false, "1.32"},
		{"unannotated API deprecated after the version", map[string]catalog.Release{"c": {Major: 1, Minor: 28}}, ev("6", "flowcontrol.apiserver.k8s.io", "v1beta3", "flowschemas", 200, false), false, false, ""},
		{"annotation without release: catalog's", nil, ev("7", "storage.k8s.io", "v1beta1", "volumeattributesclasses", 200, true), true, false, "1.37"},
		{"annotated CRD", nil, ev("8", "e2e.example.com", "v1beta1", "widgets", 200, true), true, false, ""},
		{"404 to a GA API", nil, ev("9", "apps", "v1", "deployments", 404, false), false, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, st := runAggregator(t, now, tc.versions)
			sum, err := a.Ingest(context.Background(), classify.Origin{Source: "test", Cluster: "c", Node: "n"}, []classify.Event{tc.event})
			require.NoError(t, err)
			if !tc.counted {
				require.Equal(t, classify.Summary{Skipped: 1, SkippedBy: map[string]int{"not_deprecated": 1}}, sum)
				require.Empty(t, st.APIs())
				return
			}
			require.Equal(t, classify.Summary{Counted: 1}, sum)
			infos := st.APIs()
			require.Len(t, infos, 1)
			require.Equal(t, tc.release, infos[0].RemovedRelease)
			require.NoError(t, st.ScanCounts("c", infos[0].API, now, now, func(k countkey.CountKey, n uint64) error {
				require.Equal(t, tc.removed, k.Removed)
				return nil
			}))
		})
	}
}
