package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// writeKafkaConfig writes a config file; extra are more lines of the
// kafka key, e.g. "  maxDecompressedBytes: 1048576".
func writeKafkaConfig(t *testing.T, brokers []string, topic, group string, extra ...string) string {
	cfg := filepath.Join(t.TempDir(), "sunset.yaml")
	more := ""
	for _, e := range extra {
		more += e + "\n"
	}
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`kafka:
  brokers: [%s]
  topics: [%s]
  groupID: %s
  sessionTimeout: 2s
  batchSize: 100
  batchWait: 10ms
%s`, strings.Join(brokers, ", "), topic, group, more)), 0o600))
	return cfg
}

// A stream of 20,000 messages (5% deprecated, some delivered twice) is
// consumed while sunset is killed with SIGKILL at random points, at least
// five times. The counts must come out exact. A tenth of the other
// requests are at stage RequestReceived, and a third of all messages come
// in a fluent-bit envelope and a third in AKS's (records from Event Hubs),
// so that events set aside undecoded by the pre-filter and events read out
// of envelopes all share batches, and commits, with counted ones.
func TestKafkaExactlyOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "audit-crash", 4)
	group := "crash-" + topic
	cfg := writeKafkaConfig(t, brokers, topic, group)
	dataDir := t.TempDir()
	now := time.Now().UTC()

	const total = 20000
	want := map[string]int64{}
	var msgs []kafkago.Message
	for i := 0; i < total; i++ {
		deprecated := i%20 == 0
		user := i % 7
		if deprecated {
			want[fmt.Sprintf("user-%d", user)]++
		}
		id := fmt.Sprintf("crash-%d", i)
		value := kafkaEvent(id, user, deprecated, now)
		if !deprecated && i%10 == 9 {
			value = bytes.Replace(value, []byte(`"stage":"ResponseComplete"`), []byte(`"stage":"RequestReceived"`), 1)
		}
		switch i % 3 {
		case 1:
			enveloped, err := json.Marshal(map[string]string{"log": string(value) + "\n", "stream": "stdout"})
			require.NoError(t, err)
			value = enveloped
		case 2:
			// AKS's diagnostic setting, through Event Hubs.
			enveloped, err := json.Marshal(map[string]any{"records": []any{map[string]any{"category": "kube-audit", "properties": map[string]string{"log": string(value)}}}})
			require.NoError(t, err)
			value = enveloped
		}
		msgs = append(msgs, kafkago.Message{Key: []byte(id), Value: value})
		if deprecated && i%100 == 0 {
			// The shipper delivered this one twice, at a later offset.
			msgs = append(msgs, kafkago.Message{Key: []byte(id + "-again"), Value: value})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	p := startBinary(t, dataDir, "--config", cfg, "--log-level", "debug")
	kills := 0
	for chunk := 0; chunk < 10; chunk++ {
		part := msgs[chunk*len(msgs)/10 : (chunk+1)*len(msgs)/10]
		kafkatest.Produce(t, brokers, topic, kafkago.Compression(0), part...)
		if chunk%2 == 1 {
			// Killed only once it has joined the group, as in the fleet
			// test: the test broker keeps a member killed inside its
			// first JoinGroup for good (CONTRIBUTING.md).
			p.waitLogged(t, "joined consumer group", 60*time.Second)
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
			require.NoError(t, p.cmd.Process.Kill())
			<-p.exited
			kills++
			p = startBinary(t, dataDir, "--config", cfg, "--log-level", "debug")
		}
	}
	require.GreaterOrEqual(t, kills, 5)

	var got map[string]int64
	err := p.await(90*time.Second, testserver.RecheckGap, func() bool {
		got = userCounts(t, p.url)
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	require.Equal(t, want, got, "%v", err)
	// Once the group has committed the end of every partition, nothing is
	// left to be read again: Sunset commits its counts before it tells the
	// group, and resumes from the later of the two.
	kafkatest.WaitGroupCommitted(t, brokers, group, topic, 4, 30*time.Second)
	require.Equal(t, want, userCounts(t, p.url), "no late double counts")
	var sum int64
	for _, n := range want {
		sum += n
	}
	t.Logf("%d messages, %d kills, %d deprecated requests counted exactly", len(msgs), kills, sum)
}

// bombBatch is 4 messages of 300 KiB each: 1.2 MiB once inflated, a few
// kilobytes of gzip.
func bombBatch() []kafkago.Message {
	msgs := make([]kafkago.Message, 4)
	for i := range msgs {
		msgs[i].Value = []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"bomb","stage":"ResponseComplete","verb":"list","x":"` + strings.Repeat("a", 300<<10) + `"}`)
	}
	return msgs
}

// Hostile messages in the stream cost no other message its count: a
// deprecated request whose auditID is 70,000 bytes (delivered twice, it
// counts once, stored under a digest of its ID) and a compression bomb in
// each partition, a record batch of a few kilobytes that inflates past
// kafka.maxDecompressedBytes. Sunset is killed with SIGKILL after some
// commits, and right as it skips a bomb; every partition moves on to its
// end and every other deprecated request counts exactly once. A fresh
// start afterwards reads no bomb again: the skips were committed.
func TestKafkaPoisonAndBombAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "audit-hostile", 2)
	group := "hostile-" + topic
	cfg := writeKafkaConfig(t, brokers, topic, group, "  maxDecompressedBytes: 1048576")
	dataDir := t.TempDir()
	now := time.Now().UTC()

	want := map[string]int64{}
	chunk := func(from, to int) []kafkago.Message {
		var msgs []kafkago.Message
		for i := from; i < to; i++ {
			deprecated := i%10 == 0
			if deprecated {
				want[fmt.Sprintf("user-%d", i%5)]++
			}
			id := fmt.Sprintf("hostile-%d", i)
			msgs = append(msgs, kafkago.Message{Key: []byte(id), Value: kafkaEvent(id, i%5, deprecated, now)})
		}
		return msgs
	}
	longID := strings.Repeat("L", 70000)
	long := kafkaEvent(longID, 99, true, now)
	want["user-99"] = 1

	kafkatest.Produce(t, brokers, topic, kafkago.Gzip, chunk(0, 1000)...)
	p := startBinary(t, dataDir, "--config", cfg, "--log-level", "debug")
	// Two commits, at least one per partition, is all a run is sure to
	// make: when commits are slow, fetched batches merge into fewer.
	p.waitCount(t, "batch committed", 2, 60*time.Second)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited

	// Both bombs and the long ID between ordinary messages.
	kafkatest.Produce(t, brokers, topic, kafkago.Gzip, chunk(1000, 1500)...)
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Gzip, bombBatch()...)
	kafkatest.ProduceBatch(t, brokers, topic, 1, kafkago.Gzip, bombBatch()...)
	kafkatest.Produce(t, brokers, topic, kafkago.Gzip, kafkago.Message{Key: []byte("long"), Value: long})
	kafkatest.Produce(t, brokers, topic, kafkago.Gzip, chunk(1500, 2000)...)
	kafkatest.Produce(t, brokers, topic, kafkago.Gzip, kafkago.Message{Key: []byte("long-again"), Value: long})
	p = startBinary(t, dataDir, "--config", cfg, "--log-level", "debug")
	p.waitLogged(t, "skipping a record batch that decompresses to more than kafka.maxDecompressedBytes", 60*time.Second)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited

	for round := range 3 {
		kafkatest.Produce(t, brokers, topic, kafkago.Gzip, chunk(2000+round*1000, 3000+round*1000)...)
		p = startBinary(t, dataDir, "--config", cfg, "--log-level", "debug")
		p.waitCount(t, "batch committed", 2, 60*time.Second)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		<-p.exited
	}

	p = startBinary(t, dataDir, "--config", cfg, "--log-level", "debug")
	var got map[string]int64
	err := p.await(90*time.Second, testserver.RecheckGap, func() bool {
		got = userCounts(t, p.url)
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	require.Equal(t, want, got, "%v", err)
	kafkatest.WaitGroupCommitted(t, brokers, group, topic, 2, 30*time.Second)
	require.Equal(t, want, userCounts(t, p.url), "no late double counts")
	require.NotContains(t, p.stderr.String(), longID[:100], "the ID is never logged")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited

	// Started again, it finds every partition committed past its bomb:
	// one more request in each is counted, and no bomb is read again.
	p = startBinary(t, dataDir, "--config", cfg, "--log-level", "debug")
	for part := range 2 {
		id := fmt.Sprintf("marker-%d", part)
		kafkatest.ProduceBatch(t, brokers, topic, part, kafkago.Compression(0), kafkago.Message{Value: kafkaEvent(id, 98, true, now)})
	}
	want["user-98"] = 2
	err = p.await(60*time.Second, testserver.RecheckGap, func() bool {
		got = userCounts(t, p.url)
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	require.Equal(t, want, got, "%v", err)
	require.NotContains(t, p.stderr.String(), "skipping a record batch")
	var sum int64
	for _, n := range want {
		sum += n
	}
	require.Equal(t, int64(503), sum, "500 ordinary deprecated requests, the long ID's and the 2 markers")
}
