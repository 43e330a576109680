package eks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
	"github.com/kube-sunset/sunset/internal/testutil/cloudwatchtest"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// testdata is the repository's captures (testdata/README.md).
const testdata = "../../testdata"

// Two apiservers' audit streams, as EKS names them, and another stream of
// the same group that is not audit events.
var (
	streamA     = cloudwatchtest.Stream("0f3b8c2d9e1a4b5c6d7e8f9a0b1c2d3e")
	streamB     = cloudwatchtest.Stream("7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d")
	otherStream = "authenticator-0f3b8c2d9e1a4b5c6d7e8f9a0b1c2d3e"
)

// countStore is what a source commits to: a real aggregator over a real
// store.
type countStore interface {
	sink.Ingester
	sink.Tallies
	sink.CursorReader
	Requests(cluster, api string, from, to time.Time) (uint64, error)
	Interest() classify.Interest
}

// recorder passes every call to a store and keeps what the commits said:
// what was counted, what the store found counted already, the apiservers
// named, and the reasons of unreadable events.
type recorder struct {
	countStore
	mu                  sync.Mutex
	counted, duplicates int
	nodes               map[string]bool
	reasons             map[string]int
	invalid             int
	aside               classify.Prefiltered
	// failCommit, if set, is asked before each commit whether to fail it
	// instead, as a crash or a full disk would.
	failCommit func(origin classify.Origin, cursors int) bool
}

func (r *recorder) IngestAt(ctx context.Context, o classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	r.mu.Lock()
	fail := r.failCommit != nil && r.failCommit(o, len(cursors))
	r.mu.Unlock()
	if fail {
		return classify.Summary{}, fmt.Errorf("test: commit refused")
	}
	sum, err := r.countStore.IngestAt(ctx, o, events, cursors...)
	if err != nil {
		return sum, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counted += sum.Counted
	r.duplicates += sum.Duplicates
	if o.Node != "" {
		r.nodes[o.Node] = true
	}
	return sum, nil
}

func (r *recorder) CountDecodeError(source, reason string, n int) {
	r.mu.Lock()
	r.reasons[reason] += n
	r.mu.Unlock()
	r.countStore.CountDecodeError(source, reason, n)
}

func (r *recorder) CountInvalid(source string, n int) {
	r.mu.Lock()
	r.invalid += n
	r.mu.Unlock()
	r.countStore.CountInvalid(source, n)
}

func (r *recorder) CountPrefiltered(source string, p classify.Prefiltered) {
	r.mu.Lock()
	r.aside.Merge(p)
	r.mu.Unlock()
	r.countStore.CountPrefiltered(source, p)
}

// seen returns what the commits said so far.
func (r *recorder) seen() (counted, duplicates int, nodes map[string]bool, reasons map[string]int, invalid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counted, r.duplicates, maps.Clone(r.nodes), maps.Clone(r.reasons), r.invalid
}

// env is one test's CloudWatch Logs server, log group and store.
type env struct {
	t       *testing.T
	cw      *cloudwatchtest.Server
	cluster string
	group   string
	rec     *recorder
	// clock is the aggregator's.
	clock time.Time
	// ahead is how far the sources' clock is ahead of the real one, in
	// nanoseconds: a test moves it to make a sweep due.
	ahead atomic.Int64
}

// now is the sources' clock.
func (e *env) now() time.Time { return time.Now().Add(time.Duration(e.ahead.Load())) }

// advance moves the sources' clock forward by d.
func (e *env) advance(d time.Duration) { e.ahead.Add(int64(d)) }

// newEnv starts moto and a store whose clock is the captures' (so that
// every captured v1.36 event is in the last 24 hours).
func newEnv(t *testing.T) *env {
	t.Helper()
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return ingesttest.CapturedNow }, nil)
	return newEnvWith(t, c, ingesttest.CapturedNow)
}

func newEnvWith(t *testing.T, s countStore, clock time.Time) *env {
	t.Helper()
	return &env{t: t, cw: cloudwatchtest.Start(t), cluster: "eks-test", group: DefaultLogGroup("eks-test"), clock: clock,
		rec: &recorder{countStore: s, nodes: map[string]bool{}, reasons: map[string]int{}}}
}

// run is one source running against the env, until stop.
type run struct {
	t      *testing.T
	src    *Source
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
	polls  chan pollEnd
}

type pollEnd struct {
	started time.Time
	err     error
}

// start runs a new source on the env's group and store; adjust, if set,
// changes its options and knobs first, and may keep stop, which ends the
// run as a SIGKILL would: between one commit and the next.
func (e *env) start(adjust func(o *Options, k *knobs, stop func())) *run {
	e.t.Helper()
	cfg := e.cw.Config()
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{t: e.t, reg: prometheus.NewRegistry(), cancel: cancel, done: make(chan error, 1), polls: make(chan pollEnd, 1024)}
	o := Options{
		Config:     Config{Cluster: e.cluster, PollInterval: time.Minute},
		Ingester:   e.rec,
		Tallies:    e.rec,
		Cursors:    e.rec,
		Logger:     zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.InfoLevel),
		Registerer: r.reg,
		AWSConfig:  &cfg,
		Now:        e.now,
	}
	k := knobs{pageLimit: 20, wake: make(chan struct{}, 1), retryStart: time.Millisecond, retryDelay: time.Millisecond,
		polled: func(started time.Time, err error) { r.polls <- pollEnd{started, err} }}
	if adjust != nil {
		adjust(&o, &k, cancel)
	}
	src, err := newSource(o, k)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	r.src = src
	go func() { r.done <- src.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// stop ends the run and requires that it ended because it was told to.
func (r *run) stop() {
	r.t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		require.ErrorIs(r.t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		r.t.Fatal("the source did not stop within 30s of its context ending")
	}
}

// ended waits until the run stops by itself, having been stopped from a
// hook.
func (r *run) ended() {
	r.t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		require.ErrorIs(r.t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		r.t.Fatal("the source did not stop within 30s")
	}
}

// waitPoll waits for the end of a poll that started at or after from, one
// that saw everything put before from, and returns its error.
func (r *run) waitPoll(from time.Time) error {
	r.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case p := <-r.polls:
			if !p.started.Before(from) {
				return p.err
			}
		case err := <-r.done:
			r.done <- err
			r.t.Fatalf("the source stopped: %v", err)
		case <-timeout:
			r.t.Fatal("no poll ended within 30s")
		}
	}
}

// pollNow starts a poll at once (the next, if one is under way) and
// waits until it ends, requiring that it succeeded.
func (r *run) pollNow() {
	r.t.Helper()
	from := time.Now()
	r.src.knobs.wake <- struct{}{}
	require.NoError(r.t, r.waitPoll(from))
}

// events reads sunset_eks_events_total{result}.
func (r *run) events(result string) int {
	return int(testutil.ToFloat64(r.src.metrics.events.WithLabelValues(result)))
}

// requests reads sunset_eks_requests_total{operation,result}.
func (r *run) requests(op, result string) int {
	return int(testutil.ToFloat64(r.src.metrics.requests.WithLabelValues(op, result)))
}

// late reads sunset_eks_late_events_total.
func (r *run) late() int { return int(testutil.ToFloat64(r.src.metrics.late)) }

// last24h is the window of the captures' clock: its hour and the 23
// before.
func (e *env) last24h() (from, to time.Time) {
	to = e.clock.UTC().Truncate(time.Hour)
	return to.Add(-23 * time.Hour), to
}

// requireCounts requires that the store holds exactly what the independent
// count says for the last 24 hours, API by API, and that the commits
// counted that many requests in all.
func (e *env) requireCounts(want *auditcount.Counter) {
	e.t.Helper()
	keep := auditcount.Last24h(e.clock)
	byAPI := want.ByAPI(keep)
	require.NotEmpty(e.t, byAPI, "the feed must hold requests that count")
	from, to := e.last24h()
	for api, n := range byAPI {
		got, err := e.rec.Requests(e.cluster, api, from, to)
		require.NoError(e.t, err)
		require.Equal(e.t, uint64(n), got, "requests to %s", api)
	}
	counted, _, _, _, _ := e.rec.seen()
	require.Equal(e.t, int(want.Count(keep)), counted, "requests counted by all commits")
}

// independent counts lines as auditcount does, for the env's cluster.
func (e *env) independent(node string, lines ...[]byte) *auditcount.Counter {
	e.t.Helper()
	c := auditcount.New(auditcount.Options{Lifecycle: auditcount.BuiltinLifecycle(e.t)})
	for _, l := range lines {
		c.Add(e.t, e.cluster, node, l)
	}
	return c
}

// withAuditID returns the event line with another auditID, keeping its
// fields' order.
func withAuditID(t *testing.T, line []byte, id string) []byte {
	t.Helper()
	var ev struct {
		AuditID string `json:"auditID"`
	}
	require.NoError(t, json.Unmarshal(line, &ev))
	old, _ := json.Marshal(ev.AuditID)
	repl, _ := json.Marshal(id)
	out := bytes.Replace(line, append([]byte(`"auditID":`), old...), append([]byte(`"auditID":`), repl...), 1)
	require.NotEqual(t, string(line), string(out), "the line has an auditID")
	return out
}
