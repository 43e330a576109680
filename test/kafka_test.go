package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/kafkatest"
	"github.com/kube-sunset/sunset/internal/testserver"
)

// kafkaEvent is one audit event: deprecated ones hit endpoints.v1, the
// rest pods.v1.
func kafkaEvent(id string, user int, deprecated bool, at time.Time) []byte {
	resource, ann := "pods", `"authorization.k8s.io/decision":"allow"`
	if deprecated {
		resource, ann = "endpoints", `"k8s.io/deprecated":"true"`
	}
	return []byte(fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":%q,"stage":"ResponseComplete","verb":"list","user":{"username":"user-%d"},"userAgent":"client/1.0","objectRef":{"resource":%q,"apiVersion":"v1"},"responseStatus":{"code":200},"requestReceivedTimestamp":%q,"annotations":{%s}}`,
		id, user, resource, at.Format(time.RFC3339Nano), ann))
}

func writeKafkaConfig(t *testing.T, brokers []string, topic, group string) string {
	cfg := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`kafka:
  brokers: [%s]
  topics: [%s]
  groupID: %s
  sessionTimeout: 2s
  batchSize: 100
  batchWait: 10ms
`, strings.Join(brokers, ", "), topic, group)), 0o600))
	return cfg
}

// userCounts reads endpoints.v1's requests per user over the last day.
func userCounts(t *testing.T, url string) map[string]int64 {
	t.Helper()
	resp, err := httpGetJSON(url + "/apis/sunset.dev/v1/apirequestcounts/endpoints.v1?since=24h&users=100")
	if err != nil {
		return map[string]int64{}
	}
	out := map[string]int64{}
	for _, u := range resp.Status.Window.ByUser {
		out[u.UserName] = u.RequestCount
	}
	return out
}

// A stream of 20,000 messages (5% deprecated, some delivered twice) is
// consumed while sunset is killed with SIGKILL at random points, at least
// five times. The counts must come out exact. A tenth of the other
// requests are at stage RequestReceived and a third of all messages come
// in a fluent-bit envelope, so that events set aside undecoded by the
// pre-filter and events read out of envelopes both share batches, and
// commits, with counted ones.
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
		if i%3 == 1 {
			enveloped, err := json.Marshal(map[string]string{"log": string(value) + "\n", "stream": "stdout"})
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
