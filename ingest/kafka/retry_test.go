package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/ingesttest"

	"github.com/kube-sunset/sunset/internal/kafkatest"
)

// A failed commit is retried from the batch's first offset: the partition
// neither stalls nor skips nor repeats.
func TestFailedCommitsAreRetried(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "retry", 1)
	var msgs []kafkago.Message
	var want []string
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("r-%d", i)
		want = append(want, id)
		msgs = append(msgs, kafkago.Message{Value: []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `","stage":"ResponseComplete","verb":"get"}`)})
	}
	kafkatest.Produce(t, brokers, topic, kafkago.Compression(0), msgs...)

	ing := &ingesttest.Flaky{Failures: 2}
	group := "retry-" + topic
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{topic}, GroupID: group, SessionTimeout: 2 * time.Second,
		BatchSize: 4, RetryBackoff: 5 * time.Millisecond}, DefaultCluster: "c", Ingester: ing, Cursors: ing, Logger: zerolog.Nop()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	// Done when the group has committed the end of the partition: the
	// consumer tells the group only what it has committed, and resumes
	// from there, so nothing is left to be taken again.
	kafkatest.WaitGroupCommitted(t, brokers, group, topic, 1, 20*time.Second)
	pos, ok, err := ing.Cursor(c.cursorName(topic, 0))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(len(msgs)), binary.BigEndian.Uint64(pos), "the committed position is the end")
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, want, ing.Accepted())
}
