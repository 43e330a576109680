package fleet

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// records are n fleet records of requests to the deprecated core/v1
// Endpoints in cluster c, hour hour.
func records(prefix string, n int, hour time.Time) []kafkago.Message {
	msgs := make([]kafkago.Message, n)
	for i := range msgs {
		msgs[i].Value = fmt.Appendf(nil, `{"v":1,"cluster":"c","id":"%s-%d","api":"endpoints.v1","hour":%q,"node":"n","user":"u","verb":"get"}`,
			prefix, i, hour.Format(time.RFC3339))
	}
	return msgs
}

// The counter-only role (no kafka.topics) bounds decompression by
// kafka.maxDecompressedBytes, as the filter does: a record batch of the
// fleet's topic that inflates past it is skipped as too_large, and the
// records before and after it count.
func TestCounterSkipsABatchOverTheDecompressionBound(t *testing.T) {
	t.Cleanup(func() { kafka.InstallBoundedCodecs(kafka.DefaultMaxDecompressedBytes) })
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "fleet-bomb", 1)
	hour := time.Now().UTC().Truncate(time.Hour)
	bomb := make([]kafkago.Message, 4)
	for i := range bomb {
		// 300 KiB each, 1.2 MiB in all: under the default bound of
		// 32 MiB, over the 1 MiB configured.
		bomb[i].Value = []byte(strings.Repeat("a", 300<<10))
	}
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Gzip, records("before", 2, hour)...) // offsets 0-1
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Gzip, bomb...)                       // 2-5
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Gzip, records("after", 1, hour)...)  // 6

	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), time.Now, nil)
	f, err := New(Options{Config: kafka.Config{Brokers: brokers, MaxDecompressedBytes: 1 << 20, BatchSize: 100,
		RetryBackoff: 5 * time.Millisecond}, Fleet: Config{Topic: topic},
		Aggregator: c, Tallies: c, Store: counterStore{c}, Logger: zerolog.Nop(), Registerer: reg})
	require.NoError(t, err)
	require.Nil(t, f.Consumer(), "the counter alone")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	require.Eventually(t, func() bool { ok, _ := f.Ready(); return ok }, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	n, err := c.Requests("c", "endpoints.v1", hour, hour)
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
	pos, ok, err := c.Cursor(f.counter.cursorName(0))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(7), binary.BigEndian.Uint64(pos), "committed past the batch, to the end")
	require.Equal(t, 3.0, testutil.ToFloat64(f.counter.metrics.records.WithLabelValues("ok")))
	require.Equal(t, 1.0, testutil.ToFloat64(f.counter.metrics.records.WithLabelValues("too_large")))
	require.Equal(t, 0.0, testutil.ToFloat64(f.counter.metrics.records.WithLabelValues("malformed")))
}

// A record with a value is decoded whatever its headers say: a producer
// cannot pass a record off as a skipped batch.
func TestOnlyAnEmptyStandInIsASkippedBatch(t *testing.T) {
	header := []kafkago.Header{{Key: kafka.SkippedHeader, Value: []byte(kafka.ReasonTooLarge)}}
	require.True(t, skippedBatch(kafkago.Message{Offset: 5, Headers: header}))
	require.False(t, skippedBatch(kafkago.Message{Value: []byte(`{}`), Headers: header}))
	require.False(t, skippedBatch(kafkago.Message{Headers: []kafkago.Header{{Key: kafka.SkippedHeader, Value: []byte("other")}}}))
	require.False(t, skippedBatch(kafkago.Message{}))
}
