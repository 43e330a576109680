package kafka

import (
	"context"
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
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{topic}, GroupID: "retry-" + topic, SessionTimeout: 2 * time.Second,
		BatchSize: 4, RetryBackoff: 5 * time.Millisecond}, DefaultCluster: "c", Ingester: ing, Cursors: ing, Logger: zerolog.Nop()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && len(ing.Accepted()) < 10; time.Sleep(10 * time.Millisecond) {
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, want, ing.Accepted())
}
