package ingesttest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// Counter is an aggregator that commits to a real store, for tests of what
// an ingest path commits, across restarts: ingest packages see counts and
// cursors only through it, never the store.
type Counter struct {
	*aggregate.Aggregator
	store *store.Store
}

// NewCounter opens the store in dir with the clock now and runs an
// aggregator over it, its metrics registered on reg (nil: none), until the
// test ends.
func NewCounter(t testing.TB, dir string, now func() time.Time, reg prometheus.Registerer, opts ...CounterOption) *Counter {
	t.Helper()
	st, err := store.Open(store.Options{Dir: dir, Logger: zerolog.Nop(), Now: now, Merge: aggregate.StoreMerge()})
	if err != nil {
		t.Fatal(err)
	}
	o := aggregate.Options{Store: st, Logger: zerolog.Nop(), Registerer: reg, Now: now}
	for _, opt := range opts {
		opt(&o)
	}
	agg := aggregate.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { agg.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })
	return &Counter{Aggregator: agg, store: st}
}

// CounterOption changes the aggregator NewCounter runs.
type CounterOption func(*aggregate.Options)

// WithClusterVersion tells the aggregator a cluster's release (1.36), as
// clusters.<name>.version does, so that the catalog judges its requests.
func WithClusterVersion(cluster, version string) CounterOption {
	return func(o *aggregate.Options) {
		if o.ClusterVersions == nil {
			o.ClusterVersions = map[string]catalog.Release{}
		}
		o.ClusterVersions[cluster] = catalog.MustParseRelease(version)
	}
}

// Cursor reads a committed cursor.
func (c *Counter) Cursor(name string) ([]byte, bool, error) { return c.store.Cursor(name) }

// Requests is how many requests to api in cluster were counted in the hours
// [from, to].
func (c *Counter) Requests(cluster, api string, from, to time.Time) (uint64, error) {
	var n uint64
	err := c.store.ScanCounts(cluster, api, from, to, func(_ countkey.CountKey, v uint64) error {
		n += v
		return nil
	})
	return n, err
}
