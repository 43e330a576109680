package aggregate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

var now = time.Date(2026, 11, 21, 19, 50, 0, 0, time.UTC)

func newTest(t *testing.T) (*Aggregator, *store.Store) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	require.NoError(t, err)
	a := New(Options{Store: st, Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(), Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })
	return a, st
}

func deprecatedEvent(id, user string) classify.Event {
	return classify.Event{ID: id, Stage: classify.StageResponseComplete, Verb: "get", Username: user, UserAgent: "ua/1 (x)",
		ObjectRef: &classify.ObjectRef{Version: "v1", Resource: "endpoints"}, Deprecated: true,
		RequestReceived: now.Add(-10 * time.Minute)}
}

// 16 senders each deliver 50 requests twice, and every sender shares half
// its IDs with the next one, as when apiservers retry concurrently. Group
// commit must still count each ID exactly once.
func TestConcurrentIngestCountsEachRequestOnce(t *testing.T) {
	a, st := newTest(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := classify.Summary{}
	for s := 0; s < 16; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 2; round++ {
				var events []classify.Event
				for i := 0; i < 50; i++ {
					events = append(events, deprecatedEvent(fmt.Sprintf("id-%d", s*25+i), fmt.Sprintf("u%d", (s*25+i)%4)))
				}
				sum, err := a.Ingest(context.Background(), classify.Origin{Source: "test", Cluster: "c", Node: "n"}, events)
				assert.NoError(t, err)
				mu.Lock()
				total.Counted += sum.Counted
				total.Duplicates += sum.Duplicates
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// IDs 0..15*25+49 = 0..424: 425 distinct requests out of 1,600 deliveries.
	require.Equal(t, classify.Summary{Counted: 425, Duplicates: 1175}, total)
	perUser := map[string]uint64{}
	require.NoError(t, st.ScanCounts("c", "endpoints.v1", now, now, func(k countkey.CountKey, n uint64) error {
		require.Equal(t, "ua/1", k.UserAgent)
		perUser[k.Username] += n
		return nil
	}))
	require.Equal(t, map[string]uint64{"u0": 107, "u1": 106, "u2": 106, "u3": 106}, perUser)
	require.Equal(t, 1600.0, testutil.ToFloat64(a.metrics.events.WithLabelValues("test", "counted"))+
		testutil.ToFloat64(a.metrics.events.WithLabelValues("test", "duplicate")))
}

func TestIngestAfterStopFails(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	require.NoError(t, err)
	defer st.Close()
	a := New(Options{Store: st, Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.Run(ctx)
	_, err = a.Ingest(context.Background(), classify.Origin{Source: "test"}, []classify.Event{deprecatedEvent("x", "u")})
	require.ErrorIs(t, err, ErrStopped)
}

func TestTruncateKeepsWholeCharacters(t *testing.T) {
	require.Equal(t, "ab", countkey.Truncate("ab", 5))
	require.Equal(t, "é", countkey.Truncate("éé", 3))
	require.Empty(t, countkey.Truncate("é", 1))
	require.Equal(t, "endpoints.v1", countkey.APIName("", "v1", "endpoints"))
	require.Equal(t, "cronjobs.v1beta1.batch", countkey.APIName("batch", "v1beta1", "cronjobs"))
}

// Requests alike in their labels share one series update per commit; the
// requests whose labels the bounds fold still count one overflow each.
func TestRequestsMetricCountsEachRequestOfAlikeOnes(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	guard := cardinality.New(cardinality.Options{MaxSeries: 2, MaxClusters: 1, Registerer: reg})
	a := New(Options{Store: st, Logger: zerolog.Nop(), Registerer: reg, Now: func() time.Time { return now }, Labels: guard})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })

	var events []classify.Event
	for i := range 5 {
		e := deprecatedEvent(fmt.Sprintf("a-%d", i), "alice")
		events = append(events, e)
		e = deprecatedEvent(fmt.Sprintf("b-%d", i), "bob")
		e.Verb = "list"
		events = append(events, e)
		e = deprecatedEvent(fmt.Sprintf("c-%d", i), "carol")
		e.Verb = "watch"
		events = append(events, e)
	}
	sum, err := a.Ingest(context.Background(), classify.Origin{Source: "test", Cluster: "c1", Node: "n"}, events)
	require.NoError(t, err)
	require.Equal(t, 15, sum.Counted)
	// Another cluster past MaxClusters: folded into "other".
	sum, err = a.Ingest(context.Background(), classify.Origin{Source: "test", Cluster: "c2", Node: "n"},
		[]classify.Event{deprecatedEvent("d-0", "dave"), deprecatedEvent("d-1", "dave"), deprecatedEvent("d-2", "dave")})
	require.NoError(t, err)
	require.Equal(t, 3, sum.Counted)

	series := func(cluster, verb string) float64 {
		return testutil.ToFloat64(a.metrics.requests.WithLabelValues(cluster, "", "v1", "endpoints", "", "", verb, "false", "false", "deprecated"))
	}
	assert.Equal(t, 5.0, series("c1", "get"))
	assert.Equal(t, 5.0, series("c1", "list"))
	// The third series of c1 and every request of c2 are past MaxSeries.
	o := cardinality.Other
	assert.Equal(t, 8.0, testutil.ToFloat64(a.metrics.requests.WithLabelValues(o, o, o, o, o, o, o, "false", "false", "deprecated")))
	overflow := func(limit string) float64 {
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() != "sunset_metrics_overflow_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == limit && m.GetLabel()[1].GetValue() == requestsMetric {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	assert.Equal(t, 3.0, overflow(cardinality.LimitMaxClusters))
	assert.Equal(t, 8.0, overflow(cardinality.LimitMaxSeries))
}
