package gke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/pubsubtest"
)

// captured is the captured kube-apiserver events (and the public samples)
// as GKE entries, with the independent count of the events themselves.
type captured struct {
	entries  [][]byte
	eventIDs []string
	want     *auditcount.Counter
	// newest is the latest timestamp of the entries.
	newest time.Time
}

func loadCaptured(t *testing.T) captured {
	t.Helper()
	c := captured{want: auditcount.New(auditcount.Options{Lifecycle: auditcount.BuiltinLifecycle(t)})}
	refused := 0
	for _, line := range ingesttest.CapturedLines(t, "../../testdata") {
		// The truth: every line, as any input would see it.
		c.want.Add(t, testCluster, DefaultNode, line)
		entry, err := pubsubtest.LogEntry(line)
		if err != nil {
			// A line GKE could not have written (no timestamp, not an
			// event): it must not count either.
			refused++
			continue
		}
		var ev struct {
			AuditID   string    `json:"auditID"`
			Timestamp time.Time `json:"requestReceivedTimestamp"`
		}
		require.NoError(t, json.Unmarshal(line, &ev))
		c.entries = append(c.entries, entry)
		c.eventIDs = append(c.eventIDs, ev.AuditID)
		if ev.Timestamp.After(c.newest) {
			c.newest = ev.Timestamp
		}
	}
	require.Greater(t, len(c.entries), 200)
	require.Less(t, refused, 60, "lines without a timestamp (audit2rbac) or not events")
	require.Positive(t, c.want.Count(auditcount.Last24h(ingesttest.CapturedNow)))
	return c
}

// requireCounts requires the store's counts to be the independent count's,
// API by API, and nothing else counted.
func (c captured) requireCounts(t *testing.T, counter *ingesttest.Counter, reg prometheus.Gatherer) {
	t.Helper()
	from, to := ingesttest.CapturedNow.Add(-23*time.Hour).Truncate(time.Hour), ingesttest.CapturedNow.Truncate(time.Hour)
	byAPI := c.want.ByAPI(auditcount.Last24h(ingesttest.CapturedNow))
	require.NotEmpty(t, byAPI)
	total := int64(0)
	for api, n := range byAPI {
		got, err := counter.Requests(testCluster, api, from, to)
		require.NoError(t, err)
		require.Equal(t, uint64(n), got, api)
		total += n
	}
	require.Equal(t, float64(total), metric(t, reg, "sunset_ingest_events_total", map[string]string{"source": SourceName, "result": "counted"}),
		"counted once each, and nothing the independent count did not")
}

// Captured kube-apiserver v1.36 events, written as the GKE entries of the
// same requests and received from a real Pub/Sub server, count exactly as
// the independent count counts the events themselves; each message is
// acknowledged after its commit, and Newest hears of the latest entry.
func TestCapturedEventsCountAsTheEventsThemselves(t *testing.T) {
	c := loadCaptured(t)
	reg := prometheus.NewRegistry()
	order := newAckOrder(nil)
	srv := pubsubtest.Start(t, order.reactor())
	counter := newCounter(t, reg)
	order.Ingester = counter
	ids := order.publish(t, srv, c.eventIDs, c.entries...)

	var mu sync.Mutex
	var newest time.Time
	s := newSource(t, srv, order, reg, func(o *Options) {
		o.Newest = func(cluster string, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, testCluster, cluster)
			require.True(t, at.After(newest), "Newest never goes back")
			newest = at
		}
	})
	start := time.Now()
	run(t, s)
	srv.Await(t, "every message acknowledged", func() bool { return srv.Acked(ids...) == len(ids) })
	t.Logf("%d entries counted and acknowledged in %s", len(ids), time.Since(start))

	c.requireCounts(t, counter, reg)
	order.requireNoEarlyAcks(t)
	require.Equal(t, float64(len(ids)), metric(t, reg, "sunset_gke_messages_total", map[string]string{"cluster": testCluster, "result": "ok"}))
	require.Equal(t, float64(len(ids)), metric(t, reg, "sunset_gke_acks_total", map[string]string{"cluster": testCluster}))
	require.Zero(t, metric(t, reg, "sunset_gke_nacks_total", nil))
	require.Equal(t, 1.0, metric(t, reg, "sunset_gke_receiving", map[string]string{"cluster": testCluster}))
	mu.Lock()
	require.Equal(t, c.newest, newest)
	mu.Unlock()
	ok, why := s.Ready()
	require.True(t, ok, why)
}

// stopAt passes commits through to a counter until its nth, which it
// holds until its context ends, as when Sunset stops in the middle of a
// commit.
type stopAt struct {
	Ingester
	n       int32
	calls   atomic.Int32
	reached chan struct{}
}

func (s *stopAt) IngestAt(ctx context.Context, o classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	if s.calls.Add(1) == s.n {
		close(s.reached)
		<-ctx.Done()
		return classify.Summary{}, ctx.Err()
	}
	return s.Ingester.IngestAt(ctx, o, events, cursors...)
}

// Stopped in the middle of the feed, during a commit, and started again
// as a new Source on the same store, Sunset counts every request once:
// what the first committed was acknowledged, what it had not committed is
// redelivered to the second.
func TestRestartMidFeedCountsExactly(t *testing.T) {
	c := loadCaptured(t)
	reg := prometheus.NewRegistry()
	order := newAckOrder(nil)
	srv := pubsubtest.Start(t, order.reactor())
	counter := newCounter(t, reg)
	order.Ingester = counter
	ids := order.publish(t, srv, c.eventIDs, c.entries...)

	first := &stopAt{Ingester: order, n: 3, reached: make(chan struct{})}
	stop := run(t, newSource(t, srv, first, reg, func(o *Options) { o.Config.MaxOutstanding = 20 }))
	<-first.reached
	stop()
	acked := srv.Acked(ids...)
	require.Positive(t, acked, "the first source committed and acknowledged some")
	require.Less(t, acked, len(ids), "and stopped in the middle")
	require.Positive(t, metric(t, reg, "sunset_gke_nacks_total", map[string]string{"cluster": testCluster, "reason": nackStopping}))
	// The second source starts where the first stopped. Messages on the
	// wire when the first closed its stream come back once their ack
	// deadline passes, which AwaitAcked brings forward.
	run(t, newSource(t, srv, order, reg, nil))
	srv.AwaitAcked(t, ids...)
	c.requireCounts(t, counter, reg)
	order.requireNoEarlyAcks(t)
}

// failing fails the first commits it is given, either before committing
// (as on a full disk) or after (as when the answer is lost), and passes
// the rest through.
type failing struct {
	Ingester
	before, after atomic.Int32
}

func (f *failing) IngestAt(ctx context.Context, o classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	if f.before.Add(-1) >= 0 {
		return classify.Summary{}, errors.New("no space left on device")
	}
	sum, err := f.Ingester.IngestAt(ctx, o, events, cursors...)
	if err == nil && f.after.Add(-1) >= 0 {
		return sum, errors.New("the answer was lost")
	}
	return sum, err
}

// Redeliveries count once: the same entry published twice, the two
// entries of a watch, a message handed back after a failed commit and one
// handed back after a commit that went through.
func TestRedeliveriesCountOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	order := newAckOrder(nil)
	srv := pubsubtest.Start(t, order.reactor())
	counter := newCounter(t, reg)
	ing := &failing{Ingester: counter}
	ing.before.Store(2)
	ing.after.Store(1)
	order.Ingester = ing
	list := readEntry(t, "list-deprecated")
	ids := order.publish(t, srv, []string{"0b6f4c1e-3a52-4d7e-9a0c-5f1d2e8b7a10"}, list)
	s := newSource(t, srv, order, reg, nil)
	run(t, s)
	srv.Await(t, "acknowledged once committed", func() bool { return srv.Acked(ids...) == 1 })
	// Two commits failed and one went through but failed to say so: the
	// message came back three times, and counts once.
	require.Equal(t, 4, srv.Deliveries(ids[0]))
	require.Equal(t, 3.0, metric(t, reg, "sunset_gke_nacks_total", map[string]string{"cluster": testCluster, "reason": nackCommitFailed}))

	watch := "8e2b7d90-1f4c-4a3b-b5e6-0d9c8a7f6e51"
	more := order.publish(t, srv, []string{"0b6f4c1e-3a52-4d7e-9a0c-5f1d2e8b7a10", watch, watch, watch},
		list, readEntry(t, "watch-started"), readEntry(t, "watch-complete"), readEntry(t, "watch-complete"))
	srv.Await(t, "every message acknowledged", func() bool { return srv.Acked(more...) == len(more) })
	all := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	for api, want := range map[string]uint64{"volumeattributesclasses.v1beta1.storage.k8s.io": 1, "widgets.v1beta1.e2e.example.com": 1} {
		got, err := counter.Requests(testCluster, api, all, all.Add(23*time.Hour))
		require.NoError(t, err)
		require.Equal(t, want, got, api)
	}
	require.Equal(t, 2.0, metric(t, reg, "sunset_ingest_events_total", map[string]string{"source": SourceName, "result": "counted"}))
	require.Equal(t, 3.0, metric(t, reg, "sunset_ingest_events_total", map[string]string{"source": SourceName, "result": "duplicate"}),
		"the lost answer's redelivery, the second publication and the watch's second last entry")
	require.Equal(t, 1.0, metric(t, reg, "sunset_ingest_events_total", map[string]string{"source": SourceName, "result": "skipped_stage"}),
		"the watch's first entry")
	order.requireNoEarlyAcks(t)
}

// Messages that cannot count are acknowledged and counted by reason, and
// never cost the messages around them their count: interleaved with good
// ones, including hostile but readable ones (a 1 MB operation.id, a
// message of MaxMessageBytes), every good one counts, once.
func TestBadMessagesNeverCostOthersTheirCount(t *testing.T) {
	reg := prometheus.NewRegistry()
	order := newAckOrder(nil)
	srv := pubsubtest.Start(t, order.reactor())
	counter := newCounter(t, reg)
	order.Ingester = counter

	longID := strings.Repeat("L", 1_000_000)
	withID := func(id string, change func(e map[string]any)) []byte {
		return entryWith(t, func(e map[string]any) {
			e["operation"].(map[string]any)["id"] = id
			if change != nil {
				change(e)
			}
		})
	}
	padded := withID("padded", nil)
	padded = withID("padded", func(e map[string]any) {
		e["labels"].(map[string]any)["pad"] = strings.Repeat("p", MaxMessageBytes-len(padded)-len(`,"pad":""`))
	})
	require.Len(t, padded, MaxMessageBytes)
	type msg struct {
		data    []byte
		eventID string
	}
	msgs := []msg{
		{withID("good-1", nil), "good-1"},
		{[]byte("not json"), ""},
		{withID(longID, nil), countkey.MarkID(longID)},
		{readEntry(t, "not-audit"), ""},
		{withID("good-2", nil), "good-2"},
		{readEntry(t, "json-payload"), ""},
		{withID("too-large", func(e map[string]any) { e["labels"].(map[string]any)["big"] = strings.Repeat("x", MaxMessageBytes) }), ""},
		{padded, "padded"},
		{withID("bad-time", func(e map[string]any) { e["timestamp"] = "soon" }), ""},
		{[]byte(`{"protoPayload":{"@type":"type.googleapis.com/google.cloud.audit.AuditLog","serviceName":"k8s.io","methodName":7}}`), ""},
		{withID("good-3", nil), "good-3"},
		{withID(longID, nil), countkey.MarkID(longID)}, // the same request again
	}
	var data [][]byte
	var events []string
	for _, m := range msgs {
		data, events = append(data, m.data), append(events, m.eventID)
	}
	ids := order.publish(t, srv, events, data...)
	run(t, newSource(t, srv, order, reg, nil))
	srv.Await(t, "every message acknowledged", func() bool { return srv.Acked(ids...) == len(ids) })

	all := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	got, err := counter.Requests(testCluster, "volumeattributesclasses.v1beta1.storage.k8s.io", all, all.Add(23*time.Hour))
	require.NoError(t, err)
	require.Equal(t, uint64(5), got, "good-1, good-2, good-3, padded and the long ID once")
	results := map[string]float64{}
	for _, r := range []string{resultOK, string(ReasonMalformedJSON), string(ReasonNotAudit), string(ReasonWrongPayloadType),
		string(ReasonTooLarge), string(ReasonBadTimestamp), string(ReasonMalformedEntry)} {
		results[r] = metric(t, reg, "sunset_gke_messages_total", map[string]string{"cluster": testCluster, "result": r})
	}
	require.Equal(t, map[string]float64{resultOK: 6, "malformed_json": 1, "not_audit": 1, "wrong_payload_type": 1, "too_large": 1,
		"bad_timestamp": 1, "malformed_entry": 1}, results)
	for reason, n := range map[string]float64{"malformed_json": 1, "not_audit": 1, "wrong_payload_type": 1, "too_large": 1, "bad_timestamp": 1, "malformed_entry": 1} {
		require.Equal(t, n, metric(t, reg, "sunset_ingest_decode_errors_total", map[string]string{"source": SourceName, "reason": reason}), reason)
	}
	require.Equal(t, 4.0, metric(t, reg, "sunset_ingest_events_total", map[string]string{"source": SourceName, "result": "invalid"}),
		"the unreadable ones; entries of other kinds are not events")
	require.Equal(t, 1.0, metric(t, reg, "sunset_ingest_events_total", map[string]string{"source": SourceName, "result": "duplicate"}))
	require.Equal(t, float64(len(ids)), metric(t, reg, "sunset_gke_acks_total", nil))
	order.requireNoEarlyAcks(t)
}

// batches passes commits through, telling the size and node of each, and
// holds the first until release is closed.
type batches struct {
	Ingester
	release chan struct{}
	held    atomic.Bool
	// holding is closed once the first commit is held.
	holding chan struct{}
	mu      sync.Mutex
	sizes   []string
}

func (b *batches) IngestAt(ctx context.Context, o classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	if b.held.CompareAndSwap(false, true) {
		close(b.holding)
		<-b.release
	}
	b.mu.Lock()
	b.sizes = append(b.sizes, fmt.Sprintf("%s:%d", o.Node, len(events)))
	b.mu.Unlock()
	return b.Ingester.IngestAt(ctx, o, events, cursors...)
}

// The messages that arrive while a commit is under way share the next
// commit, one per node (the cluster's location), and each is
// acknowledged only once it is committed.
func TestMessagesQueuedDuringACommitShareTheNext(t *testing.T) {
	reg := prometheus.NewRegistry()
	order := newAckOrder(nil)
	srv := pubsubtest.Start(t, order.reactor())
	counter := newCounter(t, reg)
	ing := &batches{Ingester: counter, release: make(chan struct{}), holding: make(chan struct{})}
	order.Ingester = ing
	const n = 40
	var entries [][]byte
	var events []string
	for i := range n {
		id := fmt.Sprintf("req-%02d", i)
		entries = append(entries, entryWith(t, func(e map[string]any) {
			e["operation"].(map[string]any)["id"] = id
			if i%4 == 3 {
				e["resource"].(map[string]any)["labels"].(map[string]any)["location"] = "us-central1"
			}
		}))
		events = append(events, id)
	}
	var handed atomic.Int32
	allHanded := make(chan struct{})
	s := newSource(t, srv, order, reg, func(o *Options) { o.Config.MaxOutstanding = n })
	s.handedOff = func() {
		if handed.Add(1) == n {
			close(allHanded)
		}
	}
	ids := order.publish(t, srv, events[:1], entries[0])
	run(t, s)
	await(t, ing.holding, "the first commit started")
	more := order.publish(t, srv, events[1:], entries[1:]...)
	await(t, allHanded, "every message waits for a commit")
	require.Zero(t, srv.Acked(append(ids, more...)...), "nothing acknowledged before its commit")
	close(ing.release)
	srv.Await(t, "every message acknowledged", func() bool { return srv.Acked(append(ids, more...)...) == n })
	ing.mu.Lock()
	require.Equal(t, "europe-west1:1", ing.sizes[0])
	require.ElementsMatch(t, []string{"europe-west1:29", "us-central1:10"}, ing.sizes[1:], "one commit per node, in the order they came")
	ing.mu.Unlock()
	all := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	got, err := counter.Requests(testCluster, "volumeattributesclasses.v1beta1.storage.k8s.io", all, all.Add(23*time.Hour))
	require.NoError(t, err)
	require.Equal(t, uint64(n), got)
	order.requireNoEarlyAcks(t)
}
