package gke

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/pubsubtest"
)

const testCluster = "prod-gke"

// await waits until ch is closed, and fails the test, saying what it
// waited for, if that takes over a minute. Nothing in these tests sleeps
// or polls to wait: they wait on a channel a hook closes, or on the
// server's notifications (pubsubtest's Await and AwaitAcked).
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("waited a minute for %s", what)
	}
}

// newCounter is an aggregator over a real store in a temporary directory,
// with the captures' clock.
func newCounter(t *testing.T, reg prometheus.Registerer) *ingesttest.Counter {
	t.Helper()
	return ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return ingesttest.CapturedNow }, reg)
}

// Ingester is what the tests hand a Source: the aggregator, or a wrapper
// of it, which commits and tallies.
type Ingester interface {
	sink.Ingester
	sink.Tallies
}

// newSource builds a Source on srv's subscription; change, if set, changes
// its options first.
func newSource(t *testing.T, srv *pubsubtest.Server, ing Ingester, reg prometheus.Registerer, change func(*Options)) *Source {
	t.Helper()
	o := Options{
		Config:        Config{Cluster: testCluster, Subscription: srv.Subscription},
		Ingester:      ing,
		Tallies:       ing,
		Logger:        zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
		Registerer:    reg,
		ClientOptions: srv.ClientOptions(t),
	}
	if change != nil {
		change(&o)
	}
	s, err := New(context.Background(), o)
	require.NoError(t, err)
	s.retryStart = time.Millisecond
	return s
}

// run runs s until the returned stop is called (or the test ends), which
// requires Run to return the context's error.
func run(t *testing.T, s *Source) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		})
	}
	t.Cleanup(stop)
	return stop
}

// ackOrder is a pstest reactor that checks, as each acknowledgement
// reaches the server, that the counts of its message were committed
// before: it knows the event ID of each message published through it, and
// the ingester it wraps records each commit once IngestAt has returned.
type ackOrder struct {
	Ingester
	mu        sync.Mutex
	eventOf   map[string]string // message ID → event ID
	committed map[string]bool
	early     []string
	acked     int
}

func newAckOrder(ing Ingester) *ackOrder {
	return &ackOrder{Ingester: ing, eventOf: map[string]string{}, committed: map[string]bool{}}
}

// reactor is the server option that makes the check.
func (a *ackOrder) reactor() pubsubtest.Option {
	return pubsubtest.WithReactor(pstest.ServerReactorOption{FuncName: "Acknowledge", Reactor: a})
}

// React implements pstest.Reactor; it never answers in pstest's place.
func (a *ackOrder) React(req any) (bool, any, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ackID := range req.(*pubsubpb.AcknowledgeRequest).GetAckIds() {
		msg := ackID[:max(strings.LastIndexByte(ackID, ':'), 0)]
		if ev, ok := a.eventOf[msg]; ok && !a.committed[ev] {
			a.early = append(a.early, ev)
		}
		a.acked++
	}
	return false, nil, nil
}

// publish publishes entries whose events have the IDs events.
func (a *ackOrder) publish(t *testing.T, srv *pubsubtest.Server, events []string, entries ...[]byte) []string {
	t.Helper()
	ids := srv.Publish(t, entries...)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, id := range ids {
		if events != nil && events[i] != "" {
			a.eventOf[id] = events[i]
		}
	}
	return ids
}

func (a *ackOrder) IngestAt(ctx context.Context, o classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	sum, err := a.Ingester.IngestAt(ctx, o, events, cursors...)
	if err == nil {
		a.mu.Lock()
		for _, e := range events {
			a.committed[e.ID] = true
		}
		a.mu.Unlock()
	}
	return sum, err
}

// requireNoEarlyAcks requires that no message was acknowledged before its
// counts were committed.
func (a *ackOrder) requireNoEarlyAcks(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	require.Empty(t, a.early, "acknowledged before their commit")
}

// metric sums the samples of the metric name whose labels include labels.
func metric(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue samples
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}
