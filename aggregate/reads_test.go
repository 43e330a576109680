package aggregate

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

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
		_, err := a.Ingest(ctx, Origin{Source: "test", Cluster: cluster, Node: "n"}, []Event{e})
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
	_, err = a.Ingest(ctx, Origin{Source: "test", Cluster: "full", Node: "n"}, []Event{r})
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
