package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/lockedbuf"
	"github.com/kube-sunset/sunset/internal/testutil/loopback"
	"github.com/kube-sunset/sunset/store"
)

// edge is where the forwarder's events come from.
var edge = classify.Origin{Source: "webhook", Cluster: "edge", Node: "master-0"}

// outboxEnv is a real store in a directory of the test's own and an
// aggregator that commits to it: the forwarder's Aggregator and Store.
type outboxEnv struct {
	st  *store.Store
	agg *aggregate.Aggregator
	// gen made the events, at is their hour.
	gen auditgen.Options
	at  time.Time
}

func newOutboxEnv(t *testing.T) *outboxEnv {
	t.Helper()
	now := time.Now().UTC()
	clock := func() time.Time { return now }
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: clock, Merge: aggregate.StoreMerge()})
	require.NoError(t, err)
	agg := aggregate.New(aggregate.Options{Store: st, Logger: zerolog.Nop(), Now: clock})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { agg.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; require.NoError(t, st.Close()) })
	// Ten minutes into the hour before now's, so that every event falls
	// in one hour that has not expired.
	at := now.Truncate(time.Hour).Add(-50 * time.Minute)
	return &outboxEnv{st: st, agg: agg, at: at.Truncate(time.Hour),
		gen: auditgen.Options{Prefix: "fwd", DeprecatedEvery: 3, Users: 2, At: at}}
}

// events decodes the generated events [from, to): every third is a
// deprecated request that counts.
func (e *outboxEnv) events(t *testing.T, from, to int) []classify.Event {
	t.Helper()
	var out []classify.Event
	for i := from; i < to; i++ {
		ev, err := auditjson.DecodeEvent(e.gen.Append(nil, i))
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// id is the request ID of generated event i.
func (e *outboxEnv) id(i int) string {
	return classify.RequestID(fmt.Sprintf("%s-00000000-4e5f-8a9b-%012d", e.gen.Prefix, i), e.gen.At.Add(time.Duration(i)*time.Millisecond))
}

// outbox is the outbox's entries, by name, decoded.
func (e *outboxEnv) outbox(t *testing.T) (names []string, entries [][]record) {
	t.Helper()
	require.NoError(t, e.st.ScanCursors(outboxPrefix, 1000, func(name string, value []byte) error {
		var recs []record
		require.NoError(t, json.Unmarshal(value, &recs))
		names, entries = append(names, name), append(entries, recs)
		return nil
	}))
	return names, entries
}

func (e *outboxEnv) counted(t *testing.T) uint64 {
	t.Helper()
	var n uint64
	require.NoError(t, e.st.ScanCounts("edge", "endpoints.v1", e.at, e.at, func(_ countkey.CountKey, v uint64) error {
		n += v
		return nil
	}))
	return n
}

// The forwarder counts as the aggregator does and, in the same commit,
// puts the requests that count into one outbox entry per call, named in
// order; it wakes the drain only when there is something to send. A
// re-sent batch is a duplicate here but goes to the outbox again: the
// counting replicas drop the copies.
func TestForwarderQueuesWhatCountsInTheOutbox(t *testing.T) {
	e := newOutboxEnv(t)
	f := newForwarder(e.agg, e.st, nil, zerolog.Nop(), newMetrics(prometheus.NewRegistry()))
	ctx := context.Background()

	sum, err := f.Ingest(ctx, edge, e.events(t, 0, 6))
	require.NoError(t, err)
	require.Equal(t, classify.Summary{Counted: 2, Skipped: 4, SkippedBy: map[string]int{"not_deprecated": 4}}, sum)
	require.Equal(t, uint64(2), e.counted(t))
	require.Len(t, f.wake, 1, "the drain is woken")

	names, entries := e.outbox(t)
	first := outboxPrefix + f.run + "-000000000001"
	require.Equal(t, []string{first}, names)
	require.Len(t, entries[0], 2)
	for i, rec := range entries[0] {
		n := []int{0, 3}[i]
		require.Equal(t, e.id(n), rec.ID)
		require.Equal(t, fmt.Sprintf("system:serviceaccount:team-%d:sa-%d", n%2, n%2), rec.User)
		require.Equal(t, record{V: recordVersion, Cluster: "edge", ID: e.id(n), API: "endpoints.v1", Hour: e.at, Node: "master-0",
			User: rec.User, UserAgent: "controller/v1.32.4", Verb: "list", Seen: rec.Seen}, rec)
	}
	// What the outbox holds is what was classified, record for record.
	reqs, _ := e.agg.Classify(edge, e.events(t, 0, 6))
	require.Equal(t, []record{toRecord(reqs[0]), toRecord(reqs[1])}, entries[0])

	<-f.wake
	sum, err = f.IngestAt(ctx, edge, e.events(t, 0, 6))
	require.NoError(t, err)
	require.Equal(t, classify.Summary{Duplicates: 2, Skipped: 4, SkippedBy: map[string]int{"not_deprecated": 4}}, sum)
	require.Equal(t, uint64(2), e.counted(t))
	names, again := e.outbox(t)
	require.Equal(t, []string{first, outboxPrefix + f.run + "-000000000002"}, names)
	require.Equal(t, entries[0], again[1])
	require.Len(t, f.wake, 1)

	// Nothing that counts: no entry, no wake; a dry run neither.
	<-f.wake
	sum, err = f.Ingest(ctx, edge, e.events(t, 1, 3))
	require.NoError(t, err)
	require.Equal(t, classify.Summary{Skipped: 2, SkippedBy: map[string]int{"not_deprecated": 2}}, sum)
	planned, err := f.Plan(edge, e.events(t, 6, 10))
	require.NoError(t, err)
	require.Len(t, planned, 4)
	names, _ = e.outbox(t)
	require.Len(t, names, 2)
	require.Empty(t, f.wake)
	n, err := e.st.CountCursors(outboxPrefix)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// Input positions given to IngestAt commit with the counts and the
// outbox entry, and are not taken for outbox entries.
func TestForwarderCommitsCursorsWithTheOutbox(t *testing.T) {
	e := newOutboxEnv(t)
	f := newForwarder(e.agg, e.st, nil, zerolog.Nop(), newMetrics(prometheus.NewRegistry()))
	_, err := f.IngestAt(context.Background(), edge, e.events(t, 0, 4), countkey.Cursor{Name: "file:/var/log/audit.log", Value: []byte("4")})
	require.NoError(t, err)
	pos, ok, err := e.st.Cursor("file:/var/log/audit.log")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "4", string(pos))
	names, entries := e.outbox(t)
	require.Len(t, names, 1)
	require.Len(t, entries[0], 2)
}

// newTestPublisher is the publisher New builds, to brokers.
func newTestPublisher(t *testing.T, brokers []string, topic string, m *metrics) *publisher {
	t.Helper()
	cfg := settings{Config: kafka.Config{Brokers: brokers}.WithDefaults(), Fleet: Config{Topic: topic}.WithDefaults()}
	d, err := cfg.Dialer()
	require.NoError(t, err)
	p := newPublisher(cfg, d, zerolog.Nop(), m, nil)
	t.Cleanup(func() { require.NoError(t, p.close()) })
	return p
}

// readTopic reads n messages from partition 0 of topic.
func readTopic(t *testing.T, brokers []string, topic string, n int) []kafkago.Message {
	t.Helper()
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 50 * time.Millisecond})
	defer func() { require.NoError(t, r.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make([]kafkago.Message, n)
	for i := range out {
		m, err := r.ReadMessage(ctx)
		require.NoError(t, err)
		out[i] = m
	}
	return out
}

// A drain produces every outbox entry, one record per request keyed by
// cluster and request, and empties the outbox once the topic has them.
func TestDrainProducesTheOutbox(t *testing.T) {
	e := newOutboxEnv(t)
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "fleet-outbox", 1)
	m := newMetrics(prometheus.NewRegistry())
	f := newForwarder(e.agg, e.st, newTestPublisher(t, brokers, topic, m), zerolog.Nop(), m)
	ctx := context.Background()
	for _, batch := range [][2]int{{0, 6}, {6, 12}} {
		_, err := f.Ingest(ctx, edge, e.events(t, batch[0], batch[1]))
		require.NoError(t, err)
	}
	reqs, _ := e.agg.Classify(edge, e.events(t, 0, 12))
	require.Len(t, reqs, 4)

	sent, err := f.drainOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, sent, "both entries")
	n, err := e.st.CountCursors(outboxPrefix)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	require.Equal(t, 4.0, testutil.ToFloat64(m.produced.WithLabelValues(roleForward)))
	require.Equal(t, 0.0, testutil.ToFloat64(m.produceErrors.WithLabelValues(roleForward)))
	require.Equal(t, 0.0, testutil.ToFloat64(m.produced.WithLabelValues(roleFilter)))

	msgs := readTopic(t, brokers, topic, 4)
	for i, msg := range msgs {
		id := e.id([]int{0, 3, 6, 9}[i])
		require.Equal(t, "edge/"+id, string(msg.Key))
		got, err := decodeRecord(msg.Value, time.Now())
		require.NoError(t, err)
		// The legacy ID (the auditID alone) is this store's business, not
		// the wire's.
		want := reqs[i]
		require.Equal(t, want.LegacyID, want.ID[strings.Index(want.ID, "/")+1:])
		want.LegacyID = ""
		require.Equal(t, want, got)
		require.Equal(t, id, got.ID)
	}

	sent, err = f.drainOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, sent, "nothing left")
}

// When the topic does not take the records, the entries stay in the
// outbox for the next drain, the failure is counted, and the error says
// what to do.
func TestDrainKeepsTheOutboxWhenProducingFails(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	nobody := loopback.FreeAddr(t)
	for _, tc := range []struct {
		name    string
		brokers []string
		topic   string
		err     string
		cause   error
	}{
		{"no such topic", brokers, "sunset.requests-missing",
			"fleet: topic sunset.requests-missing does not exist; create it, or set kafka.fleet.topic to one that does: " +
				"[3] Unknown Topic Or Partition: the request is for a topic or partition that does not exist on this broker", kafkago.UnknownTopicOrPartition},
		{"no broker", []string{nobody}, "sunset.requests",
			"fleet: producing 2 records to topic sunset.requests: dial tcp " + nobody + ": connect: connection refused", syscall.ECONNREFUSED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newOutboxEnv(t)
			m := newMetrics(prometheus.NewRegistry())
			f := newForwarder(e.agg, e.st, newTestPublisher(t, tc.brokers, tc.topic, m), zerolog.Nop(), m)
			_, err := f.Ingest(context.Background(), edge, e.events(t, 0, 6))
			require.NoError(t, err)
			before, entries := e.outbox(t)

			sent, err := f.drainOnce(context.Background())
			require.Equal(t, 0, sent)
			require.EqualError(t, err, tc.err)
			require.ErrorIs(t, err, tc.cause)
			after, still := e.outbox(t)
			require.Equal(t, before, after)
			require.Equal(t, entries, still)
			require.Equal(t, 1.0, testutil.ToFloat64(m.produceErrors.WithLabelValues(roleForward)))
			require.Equal(t, 0.0, testutil.ToFloat64(m.produced.WithLabelValues(roleForward)))
		})
	}
}

// An entry that is not a list of records cannot be repaired by retrying:
// it is dropped, said at error level, with the entries around it; other
// cursors are not the outbox's.
func TestDrainDropsUnreadableEntries(t *testing.T) {
	e := newOutboxEnv(t)
	var log bytes.Buffer
	m := newMetrics(prometheus.NewRegistry())
	// Nothing is produced: the publisher's broker is never dialled.
	f := newForwarder(e.agg, e.st, newTestPublisher(t, []string{loopback.FreeAddr(t)}, "sunset.requests", m), zerolog.New(&log), m)
	_, err := e.agg.Apply(context.Background(), "webhook", nil,
		countkey.Cursor{Name: outboxPrefix + "a", Value: []byte("{not json")},
		countkey.Cursor{Name: outboxPrefix + "b", Value: []byte("[]")},
		countkey.Cursor{Name: "fleet:sunset.requests:0", Value: []byte{0, 0, 0, 0, 0, 0, 0, 7}})
	require.NoError(t, err)

	sent, err := f.drainOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, sent)
	n, err := e.st.CountCursors(outboxPrefix)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	_, ok, err := e.st.Cursor("fleet:sunset.requests:0")
	require.NoError(t, err)
	require.True(t, ok)
	require.JSONEq(t, `{"level":"error","error":"invalid character 'n' looking for beginning of object key string","entry":"fleet-outbox/a","message":"dropping an unreadable outbox entry"}`, log.String())
	require.Equal(t, 0.0, testutil.ToFloat64(m.produced.WithLabelValues(roleForward)))
}

// lines passes each line a logger writes to a channel.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}

// A full batch of outboxBatch entries is followed at once by the next,
// without waiting for a wake.
func TestDrainTakesFullBatchesWithoutWaiting(t *testing.T) {
	e := newOutboxEnv(t)
	cursors := make([]countkey.Cursor, outboxBatch+1)
	for i := range cursors {
		cursors[i] = countkey.Cursor{Name: fmt.Sprintf("%s%03d", outboxPrefix, i), Value: []byte("[]")}
	}
	_, err := e.agg.Apply(context.Background(), "webhook", nil, cursors...)
	require.NoError(t, err)
	m := newMetrics(prometheus.NewRegistry())
	m.outbox.Set(-1)
	logged := make(lines)
	f := newForwarder(e.agg, e.st, newTestPublisher(t, []string{loopback.FreeAddr(t)}, "sunset.requests", m), zerolog.New(logged).Level(zerolog.DebugLevel), m)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.drain(ctx); close(done) }()
	for _, want := range []int{outboxBatch, 1} {
		select {
		case line := <-logged:
			require.JSONEq(t, fmt.Sprintf(`{"level":"debug","batches":%d,"message":"forwarded outbox batches to the fleet's topic"}`, want), line)
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the drain did not forward a batch", "want %d entries", want)
		}
	}
	require.Equal(t, 0.0, testutil.ToFloat64(m.outbox))
	cancel()
	<-done
	n, err := e.st.CountCursors(outboxPrefix)
	require.NoError(t, err)
	require.Equal(t, 0, n)
}

// scriptedStore is the forwarder's Store whose outbox reads fail as a
// script says; each read is handed to the test, with its time.
type scriptedStore struct {
	fail  []bool
	calls chan time.Duration
	start time.Time
	// waiting is what CountCursors answers.
	waiting int
}

func (s *scriptedStore) Cursor(string) ([]byte, bool, error) { return nil, false, nil }

func (s *scriptedStore) ScanCursors(string, int, func(string, []byte) error) error {
	s.calls <- time.Since(s.start)
	if len(s.fail) > 0 {
		fail := s.fail[0]
		s.fail = s.fail[1:]
		if fail {
			return errors.New("store: reading cursors fleet-outbox/*: disk on fire")
		}
	}
	return nil
}

func (s *scriptedStore) CountCursors(string) (int, error) { return s.waiting, nil }
func (s *scriptedStore) DeleteCursors(...string) error    { return nil }

// While the outbox cannot be read or produced, the drain retries after 1s,
// 2s, 4s ... up to 30s, saying each time when it tries again; a success
// starts the pauses over.
func TestDrainRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &scriptedStore{fail: []bool{true, true, true, true, true, true, false, true, false}, calls: make(chan time.Duration),
			start: time.Now(), waiting: 3}
		var log lockedbuf.Buffer
		m := newMetrics(prometheus.NewRegistry())
		f := newForwarder(nil, st, nil, zerolog.New(&log), m)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { f.drain(ctx); close(done) }()

		var at []time.Duration
		for range 7 {
			at = append(at, <-st.calls)
		}
		s := time.Second
		require.Equal(t, []time.Duration{0, 1 * s, 3 * s, 7 * s, 15 * s, 31 * s, 61 * s}, at, "1s, 2s, 4s, 8s, 16s, 30s")
		synctest.Wait()
		require.Equal(t, 3.0, testutil.ToFloat64(m.outbox), "the gauge is the store's count")
		var want strings.Builder
		for _, ms := range []int{1000, 2000, 4000, 8000, 16000, 30000} {
			fmt.Fprintf(&want, `{"level":"error","error":"store: reading cursors fleet-outbox/*: disk on fire","retry_in":%d,"message":"forwarding requests to the fleet's topic failed; they stay in the outbox"}`+"\n", ms)
		}
		require.Equal(t, want.String(), log.String())

		// After the success the drain waits for a wake.
		f.wake <- struct{}{}
		require.Equal(t, 61*s, <-st.calls)
		require.Equal(t, 62*s, <-st.calls, "the pause starts over at 1s")
		synctest.Wait()
		cancel()
		<-done
		require.Equal(t, 62*s, time.Since(st.start))
	})
}
