package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// gated holds its first commit until release is closed, telling its size
// on held, and tells each commit on calls.
type gated struct {
	*ingesttest.Flaky
	release chan struct{}
	// started is closed when the first commit begins.
	started chan struct{}
	held    chan int
	calls   chan int
	mu      sync.Mutex
	n       int
}

func (g *gated) IngestAt(ctx context.Context, o classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	g.mu.Lock()
	g.n++
	n := g.n
	g.mu.Unlock()
	if n == 1 {
		close(g.started)
		g.held <- len(events)
		<-g.release
	}
	sum, err := g.Flaky.IngestAt(ctx, o, events, cursors...)
	g.calls <- len(events)
	return sum, err
}

// While a commit is slow, the partition goes on fetching and decoding; the
// batches fetched meanwhile are committed together once it is done, each
// event once and in order, and the position is the end of the last.
func TestSlowCommitDoesNotStallFetching(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "slow", 1)
	const total, size = 50, 5
	var msgs []kafkago.Message
	var want []string
	for i := range total {
		id := fmt.Sprintf("s-%02d", i)
		want = append(want, id)
		msgs = append(msgs, kafkago.Message{Value: []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `","stage":"ResponseComplete","verb":"get","annotations":{"k8s.io/deprecated":"true"}}`)})
	}
	kafkatest.Produce(t, brokers, topic, kafkago.Compression(0), msgs...)

	ing := &gated{Flaky: &ingesttest.Flaky{}, release: make(chan struct{}), started: make(chan struct{}), held: make(chan int, 1), calls: make(chan int, total)}
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{topic}, GroupID: "slow-" + topic, SessionTimeout: 2 * time.Second,
		BatchSize: size, BatchWait: time.Millisecond}, DefaultCluster: "c", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop()})
	require.NoError(t, err)
	fetched := make(chan int64, total)
	c.prepared = func(_ string, _ int, next int64) {
		// The second batch waits for the first commit to begin, so that
		// the commit cannot hold every batch.
		if next == 2*size {
			<-ing.started
		}
		fetched <- next
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	released := false
	defer func() {
		// A failed check must not leave the commit held: Run would never
		// return.
		if !released {
			close(ing.release)
		}
		cancel()
		require.NoError(t, <-done)
	}()

	// The first commit starts with the batches decoded by then, and is
	// held; every other message is fetched and decoded meanwhile.
	var first int
	select {
	case first = <-ing.held:
	case <-time.After(30 * time.Second):
		t.Fatal("no commit started")
	}
	require.Less(t, first, total)
	require.Zero(t, first%size, "whole batches")
	for next := int64(0); next < total; {
		select {
		case next = <-fetched:
		case <-time.After(30 * time.Second):
			t.Fatalf("fetching stalled at offset %d behind a slow commit", next)
		}
	}
	require.Empty(t, ing.Accepted(), "the first commit is still held")
	released = true
	close(ing.release)

	// The first commit, then what was fetched behind it merged into
	// fewer commits than batches. (The last batch may reach the queue
	// after the merged commit has started: the hook runs as a batch is
	// handed over, not once it is queued.)
	var commits []int
	for got := 0; got < total; {
		select {
		case n := <-ing.calls:
			commits = append(commits, n)
			got += n
		case <-time.After(30 * time.Second):
			t.Fatalf("commits so far: %v", commits)
		}
	}
	require.Equal(t, first, commits[0])
	require.Less(t, len(commits)-1, (total-first)/size, "batches fetched behind a slow commit are merged: %v", commits)
	require.Equal(t, want, ing.Accepted())
	pos, ok, err := ing.Cursor(c.cursorName(topic, 0))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(total), binary.BigEndian.Uint64(pos))
}
