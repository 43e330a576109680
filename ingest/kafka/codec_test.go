package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// boundedTo is kafka-go's codec table bounded to n bytes, apart from the
// process's, so that tests of the codecs neither depend on
// InstallBoundedCodecs having run nor change its bound, and run in parallel.
func boundedTo(n int64) [len(compress.Codecs)]compress.Codec {
	limit := new(atomic.Int64)
	limit.Store(n)
	return boundedCodecs(limit)
}

// Every codec kafka-go reads with stops one byte past the bound, and
// reads a batch of exactly the bound whole.
func TestCodecsStopAtTheBound(t *testing.T) {
	t.Parallel()
	const bound = 1 << 20
	codecs := boundedTo(bound)
	for _, c := range []compress.Compression{compress.Gzip, compress.Snappy, compress.Lz4, compress.Zstd} {
		t.Run(codecs[c].Name(), func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				size    int
				tooLong bool
			}{{bound, false}, {bound + 1, true}, {64 << 20, true}} {
				t.Run(fmt.Sprintf("%d bytes", tc.size), func(t *testing.T) {
					var z bytes.Buffer
					w := codecs[c].NewWriter(&z)
					_, err := w.Write(make([]byte, tc.size))
					require.NoError(t, err)
					require.NoError(t, w.Close())
					r := codecs[c].NewReader(&z)
					var out bytes.Buffer
					n, err := out.ReadFrom(r)
					require.NoError(t, r.Close())
					if !tc.tooLong {
						require.NoError(t, err)
						require.Equal(t, int64(tc.size), n)
						return
					}
					require.EqualError(t, err, "kafka: a record batch decompresses to more than 1048576 bytes (kafka.maxDecompressedBytes)")
					require.True(t, isTooLarge(err))
					var ke kafkago.Error
					require.ErrorAs(t, err, &ke, "kafka-go's reader hands it to FetchMessage")
					require.Equal(t, kafkago.MessageSizeTooLarge, ke)
					require.Equal(t, int64(bound), n, "nothing past the bound is kept")
				})
			}
		})
	}
	// Writers are kafka-go's own.
	require.Equal(t, "gzip", codecs[compress.Gzip].Name())
	_, ok := codecs[compress.Gzip].NewWriter(io.Discard).(interface{ Flush() error })
	require.True(t, ok)
}

// InstallBoundedCodecs puts the bounded codecs in kafka-go's table once,
// around kafka-go's own, and every call sets their bound: zero is the
// default.
func TestInstallBoundedCodecs(t *testing.T) {
	t.Cleanup(func() { InstallBoundedCodecs(DefaultMaxDecompressedBytes) })
	for _, tc := range []struct{ n, want int64 }{{1 << 20, 1 << 20}, {2 << 20, 2 << 20}, {0, 4 << 20}} {
		InstallBoundedCodecs(tc.n)
		for c, want := range map[compress.Compression]compress.Codec{
			compress.Gzip:   &compress.GzipCodec,
			compress.Snappy: &snappyCodec{Codec: &compress.SnappyCodec, limit: &maxDecompressed},
			compress.Lz4:    &compress.Lz4Codec,
			compress.Zstd:   &zstdCodec{Codec: &compress.ZstdCodec, limit: &maxDecompressed},
		} {
			require.Equal(t, &boundedCodec{Codec: want, limit: &maxDecompressed}, compress.Codecs[c], "%s after InstallBoundedCodecs(%d)", c, tc.n)
		}
		require.Nil(t, compress.Codecs[compress.None])
		require.Equal(t, tc.want, maxDecompressed.Load())
	}
}

// bombMessages are n messages of size bytes each, which compress to
// almost nothing.
func bombMessages(n, size int) []kafkago.Message {
	msgs := make([]kafkago.Message, n)
	for i := range msgs {
		msgs[i].Value = []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"bomb","stage":"ResponseComplete","verb":"get","x":"` + strings.Repeat("a", size) + `"}`)
	}
	return msgs
}

func events(prefix string, n int) ([]kafkago.Message, []string) {
	var msgs []kafkago.Message
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		ids = append(ids, id)
		msgs = append(msgs, kafkago.Message{Value: []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `","stage":"ResponseComplete","verb":"get"}`)})
	}
	return msgs, ids
}

// A record batch of a few kilobytes that inflates past the bound is
// poison (too_large): the consumer neither stalls nor dies on it, counts
// every message before and after it once, and commits the end of the
// partition.
func TestCompressionBombIsSkipped(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "bomb", 1)
	before, wantBefore := events("before", 3)
	after, wantAfter := events("after", 3)
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Gzip, before...)                   // offsets 0-2
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Gzip, bombMessages(4, 300<<10)...) // 3-6: 1.2 MiB inflated
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Gzip, after...)                    // 7-9

	ing := &ingesttest.Flaky{}
	reg := prometheus.NewRegistry()
	group := "bomb-" + topic
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{topic}, GroupID: group, SessionTimeout: 2 * time.Second,
		MaxDecompressedBytes: 1 << 20, BatchSize: 100, RetryBackoff: 5 * time.Millisecond},
		DefaultCluster: "c", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop(), Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	kafkatest.WaitGroupCommitted(t, brokers, group, topic, 1, 30*time.Second)
	cancel()
	require.NoError(t, <-done)

	require.Equal(t, append(wantBefore, wantAfter...), ing.Accepted())
	pos, ok, err := ing.Cursor(c.cursorName(topic, 0))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(10), binary.BigEndian.Uint64(pos), "committed past the bomb, to the end")
	poison := c.Poison()
	require.Len(t, poison, 1)
	require.Equal(t, PoisonSample{Reason: ReasonTooLarge, Topic: topic, Partition: 0, Offset: 3, Messages: 4, Time: poison[0].Time}, poison[0])
	require.Equal(t, 6.0, testutil.ToFloat64(c.metrics.messages.WithLabelValues(topic, "ok")))
	require.Equal(t, 4.0, testutil.ToFloat64(c.metrics.messages.WithLabelValues(topic, ReasonTooLarge)))
}

// FuzzBoundedCodecs compresses arbitrary bytes with each codec and reads
// them back through the bounded readers: a batch up to the bound comes
// back exactly, a larger one stops at the bound with TooLargeError. Seeds
// include runs that compress a thousandfold, as bombs do.
func FuzzBoundedCodecs(f *testing.F) {
	f.Add([]byte(`{"kind":"Event","auditID":"a"}`), uint16(64), uint8(1))
	f.Add(bytes.Repeat([]byte{0}, 60000), uint16(1000), uint8(2))
	f.Add(bytes.Repeat([]byte("a"), 4097), uint16(4096), uint8(3))
	f.Add(bytes.Repeat([]byte(`{"items":[1,1,1]}`), 3000), uint16(65535), uint8(4))
	f.Add([]byte{}, uint16(0), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, bound uint16, code uint8) {
		c := compress.Compression(1 + code%4)
		codecs := boundedTo(int64(bound))
		var z bytes.Buffer
		w := codecs[c].NewWriter(&z)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r := codecs[c].NewReader(&z)
		var out bytes.Buffer
		_, err := out.ReadFrom(r)
		_ = r.Close()
		if len(data) <= int(bound) {
			if err != nil || !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("%s: %d bytes under a bound of %d: got %d bytes, %v", c, len(data), bound, out.Len(), err)
			}
			return
		}
		if !isTooLarge(err) || out.Len() != int(bound) || !bytes.Equal(out.Bytes(), data[:bound]) {
			t.Fatalf("%s: %d bytes over a bound of %d: got %d bytes, %v", c, len(data), bound, out.Len(), err)
		}
	})
}
