// Package kafkatest gives tests a real Kafka-protocol broker: the brokers
// named by KAFKA_BROKERS (comma-separated), or else an in-process kfake
// cluster. Topics get unique names, so tests can share an external broker.
package kafkatest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Brokers returns broker addresses for the test. kfake options apply only
// to the in-process cluster.
func Brokers(t testing.TB, opts ...kfake.Opt) []string {
	t.Helper()
	if env := os.Getenv("KAFKA_BROKERS"); env != "" {
		return strings.Split(env, ",")
	}
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("starting kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// Topic creates a topic with a unique name and returns the name.
func Topic(t testing.TB, brokers []string, prefix string, partitions int) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	CreateTopic(t, brokers, name, partitions)
	return name
}

// CreateTopic creates a topic of the given name.
func CreateTopic(t testing.TB, brokers []string, name string, partitions int) {
	t.Helper()
	conn, err := kafkago.Dial("tcp", brokers[0])
	if err != nil {
		t.Fatalf("dialing %s: %v", brokers[0], err)
	}
	defer func() { _ = conn.Close() }()
	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatalf("finding the controller: %v", err)
	}
	cc, err := kafkago.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatalf("dialing the controller: %v", err)
	}
	defer func() { _ = cc.Close() }()
	if err := cc.CreateTopics(kafkago.TopicConfig{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}); err != nil {
		t.Fatalf("creating topic %s: %v", name, err)
	}
}

// Produce writes messages to topic; a message's Key picks its partition by
// hash, or set Partition with a Writer of your own.
func Produce(t testing.TB, brokers []string, topic string, codec kafkago.Compression, msgs ...kafkago.Message) {
	t.Helper()
	// Its own transport: the shared default caches metadata for seconds
	// and would not yet know a topic created just before.
	produce(t, &kafkago.Transport{}, brokers, topic, codec, msgs...)
}

// PlainOverTLS is a transport to brokers that serve TLS with a
// certificate caPEM signed and take SASL PLAIN, as Event Hubs does.
func PlainOverTLS(caPEM []byte, user, password string) *kafkago.Transport {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	return &kafkago.Transport{TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		SASL: plain.Mechanism{Username: user, Password: password}}
}

// ProduceVia is Produce, uncompressed, over transport.
func ProduceVia(t testing.TB, transport *kafkago.Transport, brokers []string, topic string, msgs ...kafkago.Message) {
	t.Helper()
	produce(t, transport, brokers, topic, kafkago.Compression(0), msgs...)
}

func produce(t testing.TB, transport *kafkago.Transport, brokers []string, topic string, codec kafkago.Compression, msgs ...kafkago.Message) {
	t.Helper()
	w := &kafkago.Writer{
		Addr:         kafkago.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafkago.Hash{},
		BatchTimeout: 5 * time.Millisecond,
		BatchSize:    1000,
		RequiredAcks: kafkago.RequireAll,
		Compression:  codec,
		Transport:    transport,
	}
	defer func() { _ = w.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
}

// ProduceBatch writes msgs to one partition of topic as one record batch,
// compressed with codec, however large they are: a compression bomb is a
// small batch of many bytes once inflated.
func ProduceBatch(t testing.TB, brokers []string, topic string, partition int, codec kafkago.Compression, msgs ...kafkago.Message) {
	t.Helper()
	size := 0
	for _, m := range msgs {
		size += len(m.Key) + len(m.Value) + 64
	}
	w := &kafkago.Writer{
		Addr:         kafkago.TCP(brokers...),
		Topic:        topic,
		Balancer:     kafkago.BalancerFunc(func(kafkago.Message, ...int) int { return partition }),
		BatchTimeout: time.Hour, // the batch is sent when it holds all of msgs
		BatchSize:    len(msgs),
		BatchBytes:   int64(size),
		RequiredAcks: kafkago.RequireAll,
		Compression:  codec,
		Transport:    &kafkago.Transport{},
	}
	defer func() { _ = w.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing a batch to %s: %v", topic, err)
	}
}

// GroupCommitted reports whether group has committed the end of every
// partition of topic, that is, it has consumed everything produced so far.
func GroupCommitted(ctx context.Context, brokers []string, group, topic string, partitions int) (bool, error) {
	client := &kafkago.Client{Addr: kafkago.TCP(brokers...), Timeout: 10 * time.Second}
	ids := make([]int, partitions)
	reqs := make([]kafkago.OffsetRequest, partitions)
	for p := range partitions {
		ids[p], reqs[p] = p, kafkago.LastOffsetOf(p)
	}
	ends, err := client.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		return false, err
	}
	committed, err := client.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ids}})
	if err != nil {
		return false, err
	}
	end := map[int]int64{}
	for _, p := range ends.Topics[topic] {
		end[p.Partition] = p.LastOffset
	}
	for _, p := range committed.Topics[topic] {
		if p.CommittedOffset < end[p.Partition] {
			return false, nil
		}
	}
	return len(committed.Topics[topic]) == partitions, nil
}

// WaitGroupCommitted fails t unless group commits the end of every one of
// topic's partitions within timeout. The offsets are the broker's, which
// has no hook to wait on, so it is asked until they are there.
func WaitGroupCommitted(t testing.TB, brokers []string, group, topic string, partitions int, timeout time.Duration) {
	t.Helper()
	committed := func() bool {
		ok, err := GroupCommitted(context.Background(), brokers, group, topic, partitions)
		return err == nil && ok
	}
	if !pollUntil(committed, timeout) {
		t.Fatalf("the group %s did not commit the end of every partition of %s within %s", group, topic, timeout)
	}
}

// pollUntil asks done until it answers true or timeout passes.
func pollUntil(done func() bool, timeout time.Duration) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !done() {
		select {
		case <-tick.C:
		case <-deadline:
			return done()
		}
	}
	return true
}

// JoinAndDie is a consumer killed inside its first JoinGroup: it sends
// group's coordinator the JoinGroup of a new member subscribed to topics,
// as kafka-go's consumers send it (version 1, the range protocol), and
// closes the connection without waiting for the answer.
func JoinAndDie(t testing.TB, brokers []string, group string, sessionTimeout time.Duration, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := &kafkago.Client{Addr: kafkago.TCP(brokers...), Transport: &kafkago.Transport{}}
	found, err := client.FindCoordinator(ctx, &kafkago.FindCoordinatorRequest{Key: group, KeyType: kafkago.CoordinatorKeyTypeConsumer})
	if err == nil {
		err = found.Error
	}
	if err == nil && found.Coordinator == nil {
		err = errors.New("no coordinator in the answer")
	}
	if err != nil {
		t.Fatalf("finding the coordinator of %s: %v", group, err)
	}
	meta := kmsg.ConsumerMemberMetadata{Topics: topics, UserData: []byte{}}
	protocol := kmsg.NewJoinGroupRequestProtocol()
	protocol.Name, protocol.Metadata = "range", meta.AppendTo(nil)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 1
	join.Group, join.ProtocolType = group, "consumer"
	join.SessionTimeoutMillis = int32(sessionTimeout.Milliseconds())
	join.RebalanceTimeoutMillis = join.SessionTimeoutMillis
	join.Protocols = []kmsg.JoinGroupRequestProtocol{protocol}
	addr := net.JoinHostPort(found.Coordinator.Host, strconv.Itoa(found.Coordinator.Port))
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dialing the coordinator %s: %v", addr, err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("killed-in-join")).AppendRequest(nil, join, 1)); err != nil {
		t.Fatalf("sending JoinGroup to %s: %v", addr, err)
	}
}
