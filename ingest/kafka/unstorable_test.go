package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// refusing is the real aggregator over a real store, which refuses any
// commit that holds the event whose auditID is "poison" as the store
// refuses what it can never write: with an error that matches
// countkey.ErrUnstorable.
type refusing struct{ *ingesttest.Counter }

func (r refusing) IngestAt(ctx context.Context, o classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	for _, e := range events {
		if e.ID == "poison" {
			return classify.Summary{}, fmt.Errorf("refusing the poison event: %w", countkey.ErrUnstorable)
		}
	}
	return r.Counter.IngestAt(ctx, o, events, cursors...)
}

func deprecatedMessage(id string) kafkago.Message {
	return kafkago.Message{Value: []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `","stage":"ResponseComplete","verb":"get",` +
		`"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-21T19:10:00Z","annotations":{"k8s.io/deprecated":"true"}}`)}
}

// A message that can never be stored, between six that can, in one
// batch: before, the batch's commit failed, and the partition read the
// same batch again for ever, counting none of the six. Now the batch is
// committed apart down to the message at fault, which is poison
// (unstorable); the six count exactly once, and the partition's
// position is committed past all seven, to badger and to the group.
func TestUnstorableMessageIsPoison(t *testing.T) {
	now := time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "unstorable", 1)
	var msgs []kafkago.Message
	for i := range 3 {
		msgs = append(msgs, deprecatedMessage(fmt.Sprint("before-", i)))
	}
	msgs = append(msgs, deprecatedMessage("poison"))
	for i := range 3 {
		msgs = append(msgs, deprecatedMessage(fmt.Sprint("after-", i)))
	}
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Compression(0), msgs...)

	ing := refusing{ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return now }, nil)}
	reg := prometheus.NewRegistry()
	group := "unstorable-" + topic
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{topic}, GroupID: group, SessionTimeout: 2 * time.Second,
		BatchSize: 100, RetryBackoff: 5 * time.Millisecond},
		DefaultCluster: "c", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop(), Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	kafkatest.WaitGroupCommitted(t, brokers, group, topic, 1, 30*time.Second)
	cancel()
	require.NoError(t, <-done)

	n, err := ing.Requests("c", "endpoints.v1", now, now)
	require.NoError(t, err)
	require.Equal(t, uint64(6), n)
	pos, ok, err := ing.Cursor(c.cursorName(topic, 0))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(7), binary.BigEndian.Uint64(pos), "committed past the poison, to the end")
	poison := c.Poison()
	require.Len(t, poison, 1)
	require.Equal(t, PoisonSample{Reason: ReasonUnstorable, Topic: topic, Partition: 0, Offset: 3, Messages: 1, Time: poison[0].Time}, poison[0])
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.messages.WithLabelValues(topic, ReasonUnstorable)))
	require.Equal(t, 6.0, testutil.ToFloat64(c.metrics.messages.WithLabelValues(topic, "ok")))
}

// Batches merged while a commit was slow still know each message's
// events, whichever origin they joined: committing a batch's messages
// apart gives each message's events, and consecutive ones of an origin
// go together.
func TestMergedBatchesKeepEachMessagesEvents(t *testing.T) {
	ev := func(ids ...string) []classify.Event {
		out := make([]classify.Event, len(ids))
		for i, id := range ids {
			out[i] = classify.Event{ID: id}
		}
		return out
	}
	a, b := classify.Origin{Source: Source, Cluster: "a"}, classify.Origin{Source: Source, Cluster: "b"}
	prepared := func(offset int64, msgs ...OriginEvents) *batch {
		bt := &batch{}
		for i, m := range msgs {
			g, lo := bt.add(m.Origin, m.Events)
			bt.records = append(bt.records, record{offset: offset + int64(i), group: g, lo: lo, hi: len(g.Events)})
		}
		return bt
	}
	into := prepared(0, OriginEvents{a, ev("0a", "0b")}, OriginEvents{b, ev("1a")}, OriginEvents{a, ev("2a")})
	mergeBatches(into, prepared(3, OriginEvents{b, ev("3a", "3b")}, OriginEvents{a, ev("4a")}, OriginEvents{a, ev("5a")}))

	ids := func(origins []*OriginEvents) map[string][]string {
		out := map[string][]string{}
		for _, g := range origins {
			for _, e := range g.Events {
				out[g.Origin.Cluster] = append(out[g.Origin.Cluster], e.ID)
			}
		}
		return out
	}
	require.Len(t, into.records, 6)
	for i, want := range []map[string][]string{{"a": {"0a", "0b"}}, {"b": {"1a"}}, {"a": {"2a"}}, {"b": {"3a", "3b"}}, {"a": {"4a"}}, {"a": {"5a"}}} {
		require.Equal(t, int64(i), into.records[i].offset)
		require.Equal(t, want, ids(recordOrigins(into.records[i:i+1])), "message %d", i)
	}
	// Messages 4 and 5 are consecutive in origin a: one origin.
	require.Len(t, recordOrigins(into.records[4:6]), 1)
	require.Len(t, recordOrigins(into.records[3:6]), 2)
	require.Equal(t, map[string][]string{"a": {"0a", "0b", "2a", "4a", "5a"}, "b": {"1a", "3a", "3b"}}, ids(recordOrigins(into.records)))
}
