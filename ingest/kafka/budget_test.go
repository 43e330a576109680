package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/lockedbuf"
)

// A topic of many small record batches that each inflate to the bound, or
// just past it, is consumed within kafka.memoryBudget: the client reads
// ahead queueCapacity messages, not a hundred, and a batch closes at
// batchBytes, not at a thousand messages of a MiB each. Every event under
// the bound counts, exactly, and every one over it is refused as
// too_large.
func TestHeapStaysWithinTheMemoryBudget(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "budget", 1)
	const total, every = 80, 40 // one record in every is over the bound
	const bound = 1 << 20
	// Each record is its own record batch: the framing of a batch of one
	// record is well under 64 bytes.
	pad := bytes.Repeat([]byte("a"), bound)
	event := func(id string, size int) []byte {
		head := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `","stage":"ResponseComplete","verb":"get",` +
			`"objectRef":{"resource":"endpoints","apiVersion":"v1"},"annotations":{"k8s.io/deprecated":"true"},"padding":"`
		v := append([]byte(head), pad[:size-len(head)-2]...)
		return append(v, '"', '}')
	}
	w := &kafkago.Writer{Addr: kafkago.TCP(brokers...), Topic: topic, BatchSize: 1, BatchBytes: 2 * bound, BatchTimeout: time.Millisecond,
		RequiredAcks: kafkago.RequireAll, Compression: kafkago.Gzip, Transport: &kafkago.Transport{}}
	var want []string
	for i := range total {
		id := fmt.Sprintf("b-%03d", i)
		size := bound - 64
		if i%every == every-1 {
			size = bound + 1
		} else {
			want = append(want, id)
		}
		if i%2 == 1 {
			w.Compression = kafkago.Lz4
		} else {
			w.Compression = kafkago.Gzip
		}
		require.NoError(t, w.WriteMessages(context.Background(), kafkago.Message{Value: event(id, size)}))
	}
	require.NoError(t, w.Close())
	pad = nil
	t.Cleanup(func() { InstallBoundedCodecs(DefaultMaxDecompressedBytes) })

	cfg := Config{Brokers: brokers, Topics: []string{topic}, GroupID: "budget-" + topic, SessionTimeout: 2 * time.Second,
		// A batch waits long to fill: only batchBytes closes it.
		BatchWait: 2 * time.Second, MaxBytes: bound, MaxDecompressedBytes: bound, QueueCapacity: 1, BatchBytes: bound, MaxPartitions: 1}
	cfg.MemoryBudget = cfg.WithDefaults().BudgetBytes()
	require.Equal(t, int64(17<<20), cfg.MemoryBudget, "1 MiB + (1 + 5) x 1 MiB + 2 x 1 MiB + an 8 MiB zstd window")
	ing := &ingesttest.Flaky{}
	c, err := New(Options{Config: cfg, DefaultCluster: "c", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop()})
	require.NoError(t, err)

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var mu sync.Mutex
	var peak uint64
	batches := 0
	done := make(chan struct{})
	c.prepared = func(_ string, _ int, next int64) {
		// The live heap as each batch is handed to its commit: the
		// batch, what waits behind it and the client's read-ahead.
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		mu.Lock()
		defer mu.Unlock()
		batches++
		peak = max(peak, ms.HeapAlloc)
		if next == total {
			close(done)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- c.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-stopped)
	}()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		t.Fatalf("not consumed: %d counted, %d poison", len(ing.Accepted()), len(c.Poison()))
	}
	require.Eventually(t, func() bool {
		pos, ok, _ := ing.Cursor(c.cursorName(topic, 0))
		return ok && binary.BigEndian.Uint64(pos) == total
	}, 30*time.Second, 10*time.Millisecond)

	require.Equal(t, want, ing.Accepted(), "every event under the bound counts, once")
	var refused []string
	for _, p := range c.Poison() {
		refused = append(refused, fmt.Sprintf("%s@%d", p.Reason, p.Offset))
	}
	var wantRefused []string
	for i := every - 1; i < total; i += every {
		wantRefused = append(wantRefused, fmt.Sprintf("too_large@%d", i))
	}
	require.Equal(t, wantRefused, refused)

	mu.Lock()
	defer mu.Unlock()
	grew := int64(peak) - int64(base)
	t.Logf("live heap: %d MiB before, at most %d MiB more over %d batches; budget %d MiB", base>>20, grew>>20, batches, cfg.MemoryBudget>>20)
	require.LessOrEqual(t, grew, cfg.MemoryBudget, "the live heap grew past kafka.memoryBudget")
	require.Greater(t, batches, total/8, "batches closed by batchBytes, not by batchSize: %d", batches)
}

// The defaults fit their budget, and a config whose partitions cannot
// hold what they may read is refused at load, naming every term.
func TestMemoryBudgetValidate(t *testing.T) {
	base := Config{Brokers: []string{"kafka-0:9092"}, Topics: []string{"audit"}}
	d := base.WithDefaults()
	require.NoError(t, d.Validate())
	require.Equal(t, int64(37<<20), d.PartitionBytes(), "1 MiB + 6 x 4 MiB + 2 x 2 MiB + 8 MiB")
	require.Equal(t, int64(222<<20), d.BudgetBytes())
	require.Equal(t, int64(256<<20), d.MemoryBudget)

	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"exactly the budget", func(c *Config) { c.MemoryBudget = 222 << 20 }, ""},
		{"a byte short", func(c *Config) { c.MemoryBudget = 222<<20 - 1 },
			"kafka.memoryBudget: 232783871 bytes is less than 6 partitions may hold: 6 x (maxBytes 1 MiB + (queueCapacity 1 + 5) x maxDecompressedBytes 4 MiB + 2 x batchBytes 2 MiB + a decompressor's 8 MiB) = 222 MiB; raise memoryBudget (and the memory Sunset may use) or lower one of the others"},
		{"kafka-go's default queue", func(c *Config) { c.QueueCapacity = 100 },
			"kafka.memoryBudget: 256 MiB is less than 6 partitions may hold: 6 x (maxBytes 1 MiB + (queueCapacity 100 + 5) x maxDecompressedBytes 4 MiB + 2 x batchBytes 2 MiB + a decompressor's 8 MiB) = 2598 MiB; raise memoryBudget (and the memory Sunset may use) or lower one of the others"},
		{"the old bound", func(c *Config) { c.MaxDecompressedBytes = 32 << 20 },
			"kafka.memoryBudget: 256 MiB is less than 6 partitions may hold: 6 x (maxBytes 1 MiB + (queueCapacity 1 + 5) x maxDecompressedBytes 32 MiB + 2 x batchBytes 2 MiB + a decompressor's 32 MiB) = 1374 MiB; raise memoryBudget (and the memory Sunset may use) or lower one of the others"},
		{"fewer partitions, a larger bound", func(c *Config) { c.MaxDecompressedBytes, c.MaxPartitions = 32<<20, 1 }, ""},
		{"a fetch of 16 MiB", func(c *Config) { c.MaxBytes = 16 << 20 },
			"kafka.memoryBudget: 256 MiB is less than 6 partitions may hold: 6 x (maxBytes 16 MiB + (queueCapacity 1 + 5) x maxDecompressedBytes 4 MiB + 2 x batchBytes 2 MiB + a decompressor's 8 MiB) = 312 MiB; raise memoryBudget (and the memory Sunset may use) or lower one of the others"},
		{"a larger pod", func(c *Config) { c.MaxBytes, c.MemoryBudget = 16<<20, 1<<30 }, ""},
		{"negative terms", func(c *Config) { c.QueueCapacity, c.BatchBytes, c.MaxPartitions, c.MemoryBudget = -1, -1, -1, -1 },
			"kafka.batchBytes: must be at least 1, got -1\nkafka.maxPartitions: must be at least 1, got -1\nkafka.memoryBudget: must be at least 1, got -1\nkafka.queueCapacity: must be at least 1, got -1"},
		{"beyond any memory", func(c *Config) { c.MemoryBudget = 1 << 50 }, "kafka.memoryBudget: 1125899906842624 is beyond any memory"},
		{"huge terms do not overflow", func(c *Config) { c.MaxPartitions, c.QueueCapacity = 1<<30, 1<<30 },
			"kafka.maxPartitions: 1073741824 is beyond any memory\nkafka.queueCapacity: 1073741824 is beyond any memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			err := c.WithDefaults().Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
		})
	}
}

// A replica assigned more partitions than kafka.maxPartitions reads them
// all, outside the budget for the rest, and says so: in the log, in
// sunset_kafka_partitions_assigned and in a readiness warning.
func TestAssignedBeyondMaxPartitionsIsWarned(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "beyond", 3)
	var logged lockedbuf.Buffer
	reg := prometheus.NewRegistry()
	ing := &ingesttest.Flaky{}
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{topic}, GroupID: "beyond-" + topic, SessionTimeout: 2 * time.Second,
		MaxPartitions: 2}, DefaultCluster: "c", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.New(&logged), Registerer: reg})
	require.NoError(t, err)
	joined := make(chan int, 4)
	c.joined = func(_ int32, a map[string][]kafkago.PartitionAssignment) { joined <- len(a[topic]) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	require.Equal(t, 3, receive(t, joined, 30*time.Second))
	require.Equal(t, []string{"kafka: 3 partitions assigned, more than kafka.maxPartitions (2): kafka.memoryBudget does not hold the rest (see inputs/kafka.md#memory)"}, c.Warnings())
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_kafka_partitions_assigned Partitions the consumer group assigned to this consumer in its last generation; those beyond kafka.maxPartitions are read outside kafka.memoryBudget.
# TYPE sunset_kafka_partitions_assigned gauge
sunset_kafka_partitions_assigned 3
`), "sunset_kafka_partitions_assigned"))
	cancel()
	require.NoError(t, <-done)
	require.Contains(t, logged.String(), `{"level":"warn","component":"kafka","partitions":3,"max_partitions":2,"message":"assigned more partitions than kafka.maxPartitions: kafka.memoryBudget does not hold the rest; raise kafka.maxPartitions and kafka.memoryBudget, or run more replicas"}`)
}
