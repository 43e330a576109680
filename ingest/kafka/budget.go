package kafka

import (
	"context"
	"fmt"
	"sync/atomic"

	kafkago "github.com/segmentio/kafka-go"
)

// The memory budget's defaults. A partition holds, at most:
//
//   - what a fetch reads (maxBytes);
//   - one record batch inflated into the client's buffer, whose capacity
//     grows by doubling to up to twice maxDecompressedBytes;
//   - the client's read-ahead queue, queueCapacity messages and the one on
//     its way in, each up to maxDecompressedBytes;
//   - two of Sunset's batches, one being committed and one being fetched,
//     each of batchBytes and at most one message (up to
//     maxDecompressedBytes) more;
//   - the decompressor's own state, whose largest is a zstd window: the
//     bound, or 8 MiB if that is more (lz4 takes up to 4 MiB).
//
// So PartitionBytes is maxBytes + (queueCapacity + 5) x
// maxDecompressedBytes + 2 x batchBytes + max(maxDecompressedBytes, 8 MiB),
// and maxPartitions of them must fit memoryBudget. The defaults: 1 MiB +
// 6 x 4 MiB + 2 x 2 MiB + 8 MiB = 37 MiB a partition, 222 MiB for 6,
// within 256 MiB.
const (
	// DefaultMaxBytes is Kafka's own consumer default per partition
	// (max.partition.fetch.bytes).
	DefaultMaxBytes = 1 << 20
	// DefaultQueueCapacity is the client's read-ahead: one message waits
	// while Sunset decodes the one before.
	DefaultQueueCapacity = 1
	// DefaultBatchBytes holds a full batch (1,000 messages) of 2 KiB
	// events, what Metadata-level audit events weigh.
	DefaultBatchBytes = 2 << 20
	// DefaultMaxPartitions holds a fleet topic of 6 partitions, the
	// fleet's suggested least.
	DefaultMaxPartitions = 6
	// DefaultMemoryBudget is half of the shipped pod's 512 MiB: the store
	// and the webhook's in-flight bodies take the rest.
	DefaultMemoryBudget = 256 << 20
)

// PartitionBytes is the most bytes of messages one partition holds.
func (c Config) PartitionBytes() int64 {
	return int64(c.MaxBytes) + int64(c.QueueCapacity+5)*int64(c.MaxDecompressedBytes) + 2*int64(c.BatchBytes) + c.codecBytes()
}

// codecBytes is the most a decompressor holds of its own: a zstd window.
func (c Config) codecBytes() int64 {
	return max(int64(c.MaxDecompressedBytes), zstdMinWindow)
}

// BudgetBytes is the most bytes of messages maxPartitions partitions hold.
func (c Config) BudgetBytes() int64 { return int64(c.MaxPartitions) * c.PartitionBytes() }

// maxBudgetTerm keeps the budget's arithmetic far from overflowing.
const maxBudgetTerm = 1 << 40

func (c Config) validateBudget(bad func(key, format string, args ...any)) {
	ok := true
	for _, t := range []struct {
		key   string
		n     int64
		limit int64
	}{
		{"queueCapacity", int64(c.QueueCapacity), 1 << 20},
		{"batchBytes", int64(c.BatchBytes), maxBudgetTerm},
		{"maxPartitions", int64(c.MaxPartitions), 1 << 20},
		{"memoryBudget", c.MemoryBudget, maxBudgetTerm},
	} {
		switch {
		case t.n < 1:
			bad(t.key, "must be at least 1, got %d", t.n)
			ok = false
		case t.n > t.limit:
			bad(t.key, "%d is beyond any memory", t.n)
			ok = false
		}
	}
	if !ok || c.MaxBytes > maxBudgetTerm || c.MaxDecompressedBytes > maxBudgetTerm {
		return
	}
	if need := c.BudgetBytes(); need > c.MemoryBudget {
		bad("memoryBudget", "%s is less than %d partitions may hold: %[2]d x (maxBytes %s + (queueCapacity %d + 5) x maxDecompressedBytes %s + 2 x batchBytes %s + a decompressor's %s) = %s; raise memoryBudget (and the memory Sunset may use) or lower one of the others",
			mib(c.MemoryBudget), c.MaxPartitions, mib(int64(c.MaxBytes)), c.QueueCapacity, mib(int64(c.MaxDecompressedBytes)), mib(int64(c.BatchBytes)), mib(c.codecBytes()), mib(need))
	}
}

// mib writes n bytes in MiB when it is whole, else in bytes.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// messageBytes is what a fetched message holds.
func messageBytes(m *kafkago.Message) int64 {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// held counts the bytes of a partition's messages between fetch and
// commit, so that fetching waits while a full batch awaits its commit.
type held struct {
	n        atomic.Int64
	released chan struct{}
}

func newHeld() *held { return &held{released: make(chan struct{}, 1)} }

func (h *held) add(n int64) { h.n.Add(n) }

func (h *held) release(n int64) {
	h.n.Add(-n)
	select {
	case h.released <- struct{}{}:
	default:
	}
}

// waitBelow waits until fewer than limit bytes are held; false if ctx is
// done first.
func (h *held) waitBelow(ctx context.Context, limit int64) bool {
	for h.n.Load() >= limit {
		select {
		case <-h.released:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
