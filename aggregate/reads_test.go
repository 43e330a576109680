package aggregate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/store"
)

// A cluster that sends only writes for a day is one whose reads Sunset
// cannot see (kube-audit-admin on AKS, GKE without Data Access logs); one
// read, decoded or set aside by a prefilter, clears it.
func TestClustersWithoutReads(t *testing.T) {
	var mu sync.Mutex
	clock := now
	tick := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	at := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: at})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	a := New(Options{Store: st, Logger: zerolog.Nop(), Registerer: reg, Now: at})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })

	write := func(cluster, id string) {
		e := deprecatedEvent(id, "u")
		e.Verb, e.RequestReceived = "create", at().Add(-time.Minute)
		_, err := a.Ingest(ctx, classify.Origin{Source: "test", Cluster: cluster, Node: "n"}, []classify.Event{e})
		require.NoError(t, err)
	}
	write("admin-only", "w-1")
	write("full", "w-2")
	a.HeardReads("full", true)
	tick(ReadsWindow - time.Minute)
	write("admin-only", "w-3")
	write("full", "w-4")
	require.Empty(t, a.ClustersWithoutReads(), "not heard for a day yet")

	tick(time.Minute)
	require.Equal(t, []string{"admin-only", "full"}, a.ClustersWithoutReads(), "a day since full's last read too")
	r := deprecatedEvent("r-1", "u")
	r.RequestReceived = at().Add(-time.Minute)
	_, err = a.Ingest(ctx, classify.Origin{Source: "test", Cluster: "full", Node: "n"}, []classify.Event{r})
	require.NoError(t, err)
	require.Equal(t, []string{"admin-only"}, a.ClustersWithoutReads())
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP sunset_cluster_reads_missing 1 when a cluster has sent events for a day and not one get, list or watch: its audit policy or log category drops reads, so deprecated reads cannot be seen.
# TYPE sunset_cluster_reads_missing gauge
sunset_cluster_reads_missing{cluster="admin-only"} 1
sunset_cluster_reads_missing{cluster="full"} 0
`), "sunset_cluster_reads_missing"))

	// A cluster that has gone quiet for a day is not one without reads;
	// set-aside writes are heard like decoded ones.
	tick(ReadsWindow)
	require.Empty(t, a.ClustersWithoutReads())
	a.HeardReads("admin-only", false)
	require.Equal(t, []string{"admin-only"}, a.ClustersWithoutReads())
}

// readsClock is a clock that tests move by hand, starting at the current
// hour so that what the store keeps has not expired by badger's own
// clock.
type readsClock struct {
	mu sync.Mutex
	at time.Time
}

func newReadsClock() *readsClock { return &readsClock{at: time.Now().UTC().Truncate(time.Hour)} }

func (c *readsClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }

func (c *readsClock) tick(d time.Duration) { c.mu.Lock(); c.at = c.at.Add(d); c.mu.Unlock() }

// startReadsAggregator opens the store in dir and runs an aggregator on
// it; stop stops both, as a process's end does.
func startReadsAggregator(t *testing.T, dir string, clock *readsClock) (a *Aggregator, reg *prometheus.Registry, stop func()) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: dir, Logger: zerolog.Nop(), Now: clock.now})
	require.NoError(t, err)
	reg = prometheus.NewRegistry()
	a = New(Options{Store: st, Logger: zerolog.Nop(), Registerer: reg, Now: clock.now})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	return a, reg, func() { cancel(); <-done; require.NoError(t, st.Close()) }
}

// The day a cluster must send no read before it is warned about counts
// from when it was first heard, not from when the process started: a
// cluster that sent only writes for 23 hours, then one more after a
// restart, is warned about, in the metric and the list readiness shows.
func TestClustersWithoutReadsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	clock := newReadsClock()
	a, _, stop := startReadsAggregator(t, dir, clock)
	send := func(a *Aggregator, cluster, id, verb string) {
		e := deprecatedEvent(id, "u")
		e.Verb, e.RequestReceived = verb, clock.now().Add(-time.Minute)
		_, err := a.Ingest(context.Background(), classify.Origin{Source: "test", Cluster: cluster, Node: "n"}, []classify.Event{e})
		require.NoError(t, err)
	}
	for h := range 23 {
		send(a, "admin-only", fmt.Sprint("w-", h), "create")
		send(a, "full", fmt.Sprint("r-", h), "list")
		clock.tick(time.Hour)
	}
	stop()

	a, reg, stop := startReadsAggregator(t, dir, clock)
	t.Cleanup(stop)
	require.Empty(t, a.ClustersWithoutReads(), "heard for 23 hours")
	clock.tick(time.Hour)
	send(a, "admin-only", "w-23", "create")
	send(a, "full", "r-23", "list")
	require.Equal(t, []string{"admin-only"}, a.ClustersWithoutReads())
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP sunset_cluster_reads_missing 1 when a cluster has sent events for a day and not one get, list or watch: its audit policy or log category drops reads, so deprecated reads cannot be seen.
# TYPE sunset_cluster_reads_missing gauge
sunset_cluster_reads_missing{cluster="admin-only"} 1
sunset_cluster_reads_missing{cluster="full"} 0
`), "sunset_cluster_reads_missing"))
}

// What is heard of a cluster is written when it is first heard, then at
// most once a minute, except a read after a day without one, which is
// written at once: a restart must not warn about a cluster that reads
// again.
func TestReadWatchSavesAtMostOnceAMinute(t *testing.T) {
	clock := newReadsClock()
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: clock.now})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	a := New(Options{Store: st, Logger: zerolog.Nop(), Now: clock.now})
	saved := func() store.ClusterReads {
		t.Helper()
		all, err := st.LoadClusterReads()
		require.NoError(t, err)
		require.Len(t, all, 1)
		return all["c"]
	}
	first := clock.now()

	a.HeardReads("c", false)
	require.Equal(t, store.ClusterReads{FirstHeard: first, LastHeard: first}, saved(), "a new cluster is written at once")
	clock.tick(59 * time.Second)
	a.HeardReads("c", false)
	require.Equal(t, store.ClusterReads{FirstHeard: first, LastHeard: first}, saved(), "not again within the minute")
	clock.tick(time.Second)
	a.HeardReads("c", false)
	require.Equal(t, store.ClusterReads{FirstHeard: first, LastHeard: first.Add(time.Minute)}, saved())

	clock.tick(time.Second)
	a.HeardReads("c", true)
	read := first.Add(time.Minute + time.Second)
	require.Equal(t, store.ClusterReads{FirstHeard: first, LastHeard: read, LastRead: read}, saved(), "the first read is written at once")
	clock.tick(time.Second)
	a.HeardReads("c", true)
	require.Equal(t, store.ClusterReads{FirstHeard: first, LastHeard: read, LastRead: read}, saved(), "later reads wait for the minute")
}
