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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
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
		BatchSize: 4, RetryBackoff: 5 * time.Millisecond}, DefaultCluster: "c", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop()})
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

// Killed after committing its own position and before telling the group,
// a consumer that restarts on a partition with nothing more to read still
// brings the group to its position, and reads nothing again.
func TestStoredPositionAheadIsToldToTheGroup(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "ahead", 1)
	msgs, _ := events("ahead", 5)
	kafkatest.Produce(t, brokers, topic, kafkago.Compression(0), msgs...)

	ing := &ingesttest.Flaky{}
	group := "ahead-" + topic
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{topic}, GroupID: group, SessionTimeout: 2 * time.Second,
		RetryBackoff: 5 * time.Millisecond}, DefaultCluster: "c", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop()})
	require.NoError(t, err)
	end := binary.BigEndian.AppendUint64(nil, uint64(len(msgs)))
	_, err = ing.IngestAt(context.Background(), classify.Origin{}, nil, countkey.Cursor{Name: c.cursorName(topic, 0), Value: end})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	kafkatest.WaitGroupCommitted(t, brokers, group, topic, 1, 20*time.Second)
	cancel()
	require.NoError(t, <-done)
	require.Empty(t, ing.Accepted(), "nothing is read again")
}

// A group commit the broker refuses is tried again on its own, though no
// more messages come to carry the position.
func TestRefusedGroupCommitIsRetried(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	refused := make(chan struct{})
	cluster.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		commit := req.(*kmsg.OffsetCommitRequest)
		resp := commit.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, topic := range commit.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = topic.Topic
			for _, p := range topic.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.RequestTimedOut.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		close(refused)
		return resp, nil, true
	})
	brokers := cluster.ListenAddrs()
	topic := kafkatest.Topic(t, brokers, "refused", 1)
	msgs, want := events("refused", 5)
	kafkatest.Produce(t, brokers, topic, kafkago.Compression(0), msgs...)

	ing := &ingesttest.Flaky{}
	group := "refused-" + topic
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{topic}, GroupID: group, SessionTimeout: 2 * time.Second,
		RetryBackoff: 5 * time.Millisecond}, DefaultCluster: "c", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-refused
	kafkatest.WaitGroupCommitted(t, brokers, group, topic, 1, 20*time.Second)
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, want, ing.Accepted())
}
