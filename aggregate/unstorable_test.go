package aggregate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// newUnstorableTest is an aggregator over a real store in a temporary
// directory, with the merge rules Sunset runs with, both registering
// their metrics on the registry it returns. The commit loop is not
// running: the test runs it.
func newUnstorableTest(t *testing.T) (*Aggregator, *store.Store, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }, Merge: StoreMerge(), Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return New(Options{Store: st, Logger: zerolog.Nop(), Registerer: reg, Now: func() time.Time { return now }}), st, reg
}

// requestsOf is how many requests the store counted for endpoints.v1 in
// cluster.
func requestsOf(t *testing.T, st *store.Store, cluster string) uint64 {
	t.Helper()
	var n uint64
	require.NoError(t, st.ScanCounts(cluster, "endpoints.v1", now.Add(-time.Hour), now, func(_ countkey.CountKey, v uint64) error {
		n += v
		return nil
	}))
	return n
}

func deprecatedEvents(prefix string, n int) []classify.Event {
	events := make([]classify.Event, n)
	for i := range events {
		events[i] = deprecatedEvent(fmt.Sprint(prefix, i), "alice")
	}
	return events
}

// Three jobs share one group commit: three requests of cluster a, two of
// cluster b with a 9 MiB cursor (over badger's 8 MiB limit on a value, so
// its commit can never succeed), four of cluster c. Before, the group's
// one store call failed and all nine requests with it. Now the group is
// committed again job by job: a and c commit, with their cursors, and
// only b fails, with an error that says retrying cannot help.
func TestGroupCommitFailsOnlyTheJobAtFault(t *testing.T) {
	a, st, reg := newUnstorableTest(t)
	// Queued before the commit loop takes the first, the three are one
	// group, as concurrent senders' jobs are.
	a.jobs = make(chan *job, 3)
	type sender struct {
		origin classify.Origin
		job    *job
		sum    classify.Summary
	}
	var senders []*sender
	for _, s := range []struct {
		cluster string
		events  int
		cursor  []byte
	}{{"a", 3, []byte("3")}, {"b", 2, make([]byte, 9<<20)}, {"c", 4, []byte("4")}} {
		o := classify.Origin{Source: "test", Cluster: s.cluster, Node: "n"}
		j, sum := a.ingestJob(o, deprecatedEvents(s.cluster, s.events), []countkey.Cursor{{Name: "in-" + s.cluster, Value: s.cursor}})
		require.NotNil(t, j)
		a.jobs <- j
		senders = append(senders, &sender{o, j, sum})
	}
	a.commit(<-a.jobs)
	require.Empty(t, a.jobs, "one group took all three")

	results := make([]jobResult, len(senders))
	for i, s := range senders {
		results[i] = <-s.job.done
	}
	require.NoError(t, results[0].err)
	require.ErrorIs(t, results[1].err, countkey.ErrUnstorable)
	require.NotErrorIs(t, results[1].err, countkey.ErrNoSpace)
	require.NoError(t, results[2].err)
	require.Equal(t, classify.Summary{Counted: 3}, a.ingested(senders[0].origin, senders[0].job, results[0], senders[0].sum))
	require.Equal(t, classify.Summary{Counted: 4}, a.ingested(senders[2].origin, senders[2].job, results[2], senders[2].sum))

	require.Equal(t, uint64(3), requestsOf(t, st, "a"))
	require.Equal(t, uint64(0), requestsOf(t, st, "b"))
	require.Equal(t, uint64(4), requestsOf(t, st, "c"))
	for name, want := range map[string]string{"in-a": "3", "in-c": "4"} {
		v, ok, err := st.Cursor(name)
		require.NoError(t, err)
		require.True(t, ok, name)
		require.Equal(t, want, string(v))
	}
	_, ok, err := st.Cursor("in-b")
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, 7.0, testutil.ToFloat64(a.metrics.events.WithLabelValues("test", string(classify.ResultCounted))))
	// One group commit, then one per job: the group's and b's failed.
	require.Equal(t, 2.0, counterValue(t, reg, "sunset_store_commit_errors_total"))
	require.Equal(t, 4, histogramCount(t, reg, "sunset_store_commit_duration_seconds"))

	// b's senders retry with the same cursor and fail again, alone; a and
	// c's retries are duplicates.
	sum, err := a.ingestAlone(t, senders[0].origin, deprecatedEvents("a", 3), countkey.Cursor{Name: "in-a", Value: []byte("3")})
	require.NoError(t, err)
	require.Equal(t, classify.Summary{Duplicates: 3}, sum)
	_, err = a.ingestAlone(t, senders[1].origin, deprecatedEvents("b", 2), countkey.Cursor{Name: "in-b", Value: make([]byte, 9<<20)})
	require.ErrorIs(t, err, countkey.ErrUnstorable)
}

// ingestAlone is IngestAt with the test running the commit loop.
func (a *Aggregator) ingestAlone(t *testing.T, o classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	t.Helper()
	j, sum := a.ingestJob(o, events, cursors)
	a.jobs <- j
	a.commit(<-a.jobs)
	r := <-j.done
	if r.err != nil {
		return sum, r.err
	}
	return a.ingested(o, j, r, sum), nil
}

// A 9 MiB removed release, as a sender may annotate it, is skipped alone
// as too_large: before, badger refused the API's metadata record that
// would keep it, and the three good requests of the call with it.
func TestIngestSkipsARequestWithA9MiBRemovedRelease(t *testing.T) {
	a, st, _ := newUnstorableTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	events := deprecatedEvents("good-", 3)
	for i := range events {
		events[i].RemovedRelease = "1.37"
	}
	bad := deprecatedEvent("bad", "mallory")
	bad.RemovedRelease = strings.Repeat("9", 9<<20)
	// First: the newest hour decides the release, and in one hour the
	// first one given stays.
	events = append([]classify.Event{bad}, events...)
	sum, err := a.Ingest(ctx, classify.Origin{Source: "test", Cluster: "c", Node: "n"}, events)
	require.NoError(t, err)
	require.Equal(t, classify.Summary{Counted: 3, Skipped: 1, SkippedBy: map[string]int{string(countkey.SkipTooLarge): 1}}, sum)
	require.Equal(t, uint64(3), requestsOf(t, st, "c"))
	require.Equal(t, 3.0, testutil.ToFloat64(a.metrics.events.WithLabelValues("test", string(classify.ResultCounted))))
	require.Equal(t, 1.0, testutil.ToFloat64(a.metrics.events.WithLabelValues("test", string(countkey.SkipTooLarge))))
	apis := st.APIs()
	require.Len(t, apis, 1)
	require.Equal(t, "1.37", apis[0].RemovedRelease)
}

// counterValue is the value of the named counter on reg, which has one
// series.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			require.Len(t, f.GetMetric(), 1)
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// histogramCount is how many observations the named histogram on reg
// has.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return int(f.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
