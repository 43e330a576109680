package app_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

func kafkaConfig(cfg *config.Config, brokers []string, topic, group string) {
	cfg.Kafka.Config = kafka.Config{Brokers: brokers, Topics: []string{topic}, GroupID: group,
		SessionTimeout: 2 * time.Second, NodeHeader: "apiserver", NodeField: "hostname", BatchWait: 20 * time.Millisecond}
}

// waitForUsers waits until the users of an API in the window add up to
// want.
func waitForUsers(t *testing.T, s *server, name, since string, want map[string]int64) {
	t.Helper()
	var got map[string]int64
	s.await(30*time.Second, func() bool {
		code, body := s.get("/apis/sunset.dev/v1/apirequestcounts/" + name + "?users=100&since=" + since)
		got = map[string]int64{}
		if code == 200 {
			var obj sunsetv1.APIRequestCount
			require.NoError(t, json.Unmarshal(body, &obj))
			for _, u := range obj.Status.Window.ByUser {
				got[u.UserName] = u.RequestCount
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	require.Equal(t, want, got)
}

// awaitReady waits until /-/ready?verbose answers as done says it should
// stop waiting, and returns its last answer: the test server is open on
// loopback, so the answer has the detail.
func awaitReady(s *server, within time.Duration, done func(code int, body string) bool) (int, string) {
	var code int
	var body []byte
	s.await(within, func() bool {
		code, body = s.get("/-/ready?verbose")
		return done(code, string(body))
	})
	return code, string(body)
}

func ready(code int, _ string) bool { return code == 200 }

func TestKafkaMessageShapes(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "audit", 3)
	cfg := testConfig(t)
	cfg.Retention = 8 * 365 * 24 * time.Hour // the AKS sample is from 2021
	kafkaConfig(&cfg, brokers, topic, "shapes-"+topic)
	s := start(t, cfg)

	event := func(id, user string) string {
		return string(mustJSON(ev(id, "kind", "Event", "apiVersion", "audit.k8s.io/v1", "user", map[string]any{"username": user})))
	}
	flattened := ev("flat-1", "user", map[string]any{"username": "shape-flattened"})
	for k, v := range map[string]any{"@timestamp": "2026-11-21T19:10:00.1Z", "hostname": "master-f", "log_type": "audit", "kubernetes": map[string]any{"host": "master-f"}} {
		flattened[k] = v
	}
	aks, err := os.ReadFile("../testdata/public/aks-diagnostic-envelope-kube-audit-deprecated.json")
	require.NoError(t, err)
	msgs := []kafkago.Message{
		{Key: []byte("raw"), Value: []byte(event("raw-1", "shape-raw")), Headers: []kafkago.Header{{Key: "apiserver", Value: []byte("master-h")}}},
		{Key: []byte("list"), Value: eventList(ev("list-1", "user", map[string]any{"username": "shape-list"}), ev("list-2", "user", map[string]any{"username": "shape-list"}), ev("list-3", "user", map[string]any{"username": "shape-list"}))},
		{Key: []byte("flat"), Value: mustJSON(flattened)},
		{Key: []byte("fluent-bit"), Value: mustJSON(map[string]any{"log": event("fb-1", "shape-fluent-bit") + "\n", "stream": "stdout", "time": "2026-11-21T19:10:00Z"})},
		{Key: []byte("vector"), Value: mustJSON(map[string]any{"message": event("vec-1", "shape-vector"), "hostname": "master-v", "source_type": "file"})},
		{Key: []byte("aks"), Value: []byte(`{"records":[` + string(aks) + `,{"category":"kube-apiserver","properties":{"log":"I1121 not audit"}}]}`)},
		{Key: []byte("aks-single"), Value: aks}, // the same request again: a duplicate
		// Poison: each is skipped and sampled, nothing blocks.
		{Key: []byte("p1"), Value: []byte("not json at all")},
		{Key: []byte("p2"), Value: []byte(`{"hello":"world"}`)},
		{Key: []byte("p3"), Value: []byte(`{"log":"  "}`)},
		{Key: []byte("p4"), Value: []byte(`{"log":"{\"stage\": 12}"}`)},
		// The same auditID as raw-1: counted once.
		{Key: []byte("dup"), Value: []byte(event("raw-1", "shape-raw"))},
	}
	kafkatest.Produce(t, brokers, topic, kafkago.Compression(0), msgs...)
	for i, codec := range []kafkago.Compression{kafkago.Gzip, kafkago.Snappy, kafkago.Lz4, kafkago.Zstd} {
		kafkatest.Produce(t, brokers, topic, codec, kafkago.Message{Key: []byte(codec.String()), Value: []byte(event(fmt.Sprint("codec-", i), "codec-"+codec.String()))})
	}

	waitForUsers(t, s, "endpoints.v1", "24h", map[string]int64{
		"shape-raw": 1, "shape-list": 3, "shape-flattened": 1, "shape-fluent-bit": 1, "shape-vector": 1,
		"codec-gzip": 1, "codec-snappy": 1, "codec-lz4": 1, "codec-zstd": 1,
	})
	waitForUsers(t, s, "subjectaccessreviews.v1beta1.authorization.k8s.io", "60000h", map[string]int64{"system:serviceaccount:kube-system:metrics-server": 1})

	// Node from a header, from a JSON field, else the default.
	ep := getAPI(t, s, "endpoints.v1")
	nodes := map[string]int64{}
	for _, n := range ep.Status.Last24h[19].ByNode {
		nodes[n.NodeName] = n.RequestCount
	}
	require.Equal(t, map[string]int64{"master-h": 1, "master-f": 1, "master-v": 1, "kafka": 8}, nodes)

	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(fmt.Sprintf(`
# HELP sunset_kafka_messages_total Kafka messages consumed, by topic and result: ok, or why the message was skipped (malformed_json, unrecognized_shape, invalid_event, empty_envelope, too_large: in a record batch or message that decompresses to more than kafka.maxDecompressedBytes, cluster_not_allowed: of a topic in kafka.topicClusters, naming a cluster the topic may not speak for, unstorable: its events cannot be stored even alone).
# TYPE sunset_kafka_messages_total counter
sunset_kafka_messages_total{result="empty_envelope",topic=%[1]q} 1
sunset_kafka_messages_total{result="invalid_event",topic=%[1]q} 1
sunset_kafka_messages_total{result="malformed_json",topic=%[1]q} 1
sunset_kafka_messages_total{result="ok",topic=%[1]q} 12
sunset_kafka_messages_total{result="unrecognized_shape",topic=%[1]q} 1
`, topic)), "sunset_kafka_messages_total"))

	// Every partition that had messages is caught up.
	families, err := s.reg.Gather()
	require.NoError(t, err)
	lagSeries := 0
	for _, mf := range families {
		if mf.GetName() == "sunset_kafka_consumer_lag" {
			for _, m := range mf.GetMetric() {
				lagSeries++
				require.Equal(t, 0.0, m.GetGauge().GetValue())
			}
		}
	}
	require.Equal(t, 3, lagSeries, "one series per partition of the topic")

	code, body := s.get("/debug/kafka/poison")
	require.Equal(t, 200, code)
	var poison struct{ Poison []kafka.PoisonSample }
	require.NoError(t, json.Unmarshal(body, &poison))
	reasons := map[string]int{}
	for _, p := range poison.Poison {
		require.Equal(t, topic, p.Topic)
		reasons[p.Reason]++
	}
	require.Equal(t, map[string]int{"malformed_json": 1, "unrecognized_shape": 1, "empty_envelope": 1, "invalid_event": 1}, reasons)
	require.NotContains(t, string(body), "hello", "samples never hold content")

	code, body = s.get("/-/ready")
	require.Equal(t, 200, code, string(body))
}

// Two replicas in one group, each with its own data directory, split the
// partitions; the sum of their counts is exact.
func TestKafkaTwoReplicasShareTheWork(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "audit-replicas", 6)
	group := "replicas-" + topic
	cfgA, cfgB := testConfig(t), testConfig(t)
	kafkaConfig(&cfgA, brokers, topic, group)
	kafkaConfig(&cfgB, brokers, topic, group)
	a, b := start(t, cfgA), start(t, cfgB)
	for _, s := range []*server{a, b} {
		code, body := awaitReady(s, 30*time.Second, ready)
		require.Equal(t, 200, code, body)
	}
	var msgs []kafkago.Message
	for i := 0; i < 1200; i++ {
		id := fmt.Sprintf("rep-%d", i)
		msgs = append(msgs, kafkago.Message{Key: []byte(id), Value: []byte(string(mustJSON(ev(id, "kind", "Event", "apiVersion", "audit.k8s.io/v1"))))})
	}
	kafkatest.Produce(t, brokers, topic, kafkago.Compression(0), msgs...)

	total := func(s *server) int64 {
		code, body := s.get("/apis/sunset.dev/v1/apirequestcounts/endpoints.v1")
		if code != 200 {
			return 0
		}
		var obj sunsetv1.APIRequestCount
		require.NoError(t, json.Unmarshal(body, &obj))
		return obj.Status.RequestCount
	}
	// Done when the group has committed the end of every partition: a
	// replica commits its counts before it tells the group, and a
	// partition that moves resumes from there, so nothing is left to be
	// counted, once or twice.
	kafkatest.WaitGroupCommitted(t, brokers, group, topic, 6, 60*time.Second)
	ta, tb := total(a), total(b)
	require.Equal(t, int64(1200), ta+tb, "replica a counted %d, b %d", ta, tb)
	t.Logf("replica a counted %d, replica b %d", ta, tb)
}

// A replica that the group gives more partitions than kafka.maxPartitions
// reads them all and stays ready, and /-/ready?verbose says that the
// memory budget does not hold them.
func TestKafkaPartitionsBeyondMaxPartitionsAreWarned(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "audit-beyond", 3)
	cfg := testConfig(t)
	kafkaConfig(&cfg, brokers, topic, "beyond-"+topic)
	cfg.Kafka.MaxPartitions = 2
	s := start(t, cfg)
	code, body := awaitReady(s, 30*time.Second, func(code int, body string) bool {
		return code == 200 && strings.Contains(body, "warning: kafka:")
	})
	require.Equal(t, 200, code, body)
	require.Equal(t, "Sunset is ready.\nwarning: kafka: 3 partitions assigned, more than kafka.maxPartitions (2): kafka.memoryBudget does not hold the rest (see inputs/kafka.md#memory)\n", body)
}

// Events produced by kcat (librdkafka, an independent client) in several
// compression codecs are counted.
func TestKafkaEventsProducedByKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is not installed; .ci/run installs Debian's kcat")
		}
		t.Skip("kcat is not installed (apt-get install kcat); the cross-client check needs it")
	}
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "audit-kcat", 2)
	cfg := testConfig(t)
	kafkaConfig(&cfg, brokers, topic, "kcat-"+topic)
	s := start(t, cfg)

	want := map[string]int64{}
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		var lines []string
		for i := 0; i < 5; i++ {
			lines = append(lines, string(mustJSON(ev(fmt.Sprintf("kcat-%s-%d", codec, i), "kind", "Event", "apiVersion", "audit.k8s.io/v1",
				"user", map[string]any{"username": "kcat-" + codec}))))
		}
		want["kcat-"+codec] = 5
		file := filepath.Join(t.TempDir(), codec+".jsonl")
		require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
		out, err := exec.Command(kcat, "-P", "-b", strings.Join(brokers, ","), "-t", topic, "-z", codec, "-l", file).CombinedOutput()
		require.NoError(t, err, "kcat: %s", out)
	}
	waitForUsers(t, s, "endpoints.v1", "24h", want)
}

// Wrong credentials and unreachable brokers are readiness errors that say
// what is wrong; right credentials consume.
func TestKafkaAuthAndConnectionErrors(t *testing.T) {
	if os.Getenv("KAFKA_BROKERS") != "" {
		t.Skip("needs the in-process broker's SASL setup")
	}
	brokers := kafkatest.Brokers(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "s3cret"), kfake.Superuser("SCRAM-SHA-256", "admin", "s3cret"))
	for _, tc := range []struct {
		name, mechanism, password string
		brokers                   []string
		code                      int
		says                      string
	}{
		{"plain, wrong password", "plain", "nope", brokers, 503, "SASL Authentication failed"},
		{"scram, wrong password", "scram-sha-256", "nope", brokers, 503, "SASL Authentication failed"},
		{"unreachable broker", "plain", "s3cret", []string{"127.0.0.1:1"}, 503, "connection refused"},
		{"plain, right password", "plain", "s3cret", brokers, 200, "Sunset is ready"},
		{"scram, right password", "scram-sha-256", "s3cret", brokers, 200, "Sunset is ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			kafkaConfig(&cfg, tc.brokers, "audit-auth", "auth")
			// The test broker has no TLS.
			cfg.Kafka.SASL = kafka.SASLConfig{Mechanism: tc.mechanism, Username: "admin", Password: tc.password, AllowPlaintext: true}
			s := start(t, cfg)
			code, body := awaitReady(s, 15*time.Second, func(code int, body string) bool {
				return code == 200 || strings.Contains(body, "kafka: kafka")
			})
			require.Equal(t, tc.code, code, body)
			require.Contains(t, body, tc.says)
			require.NotContains(t, body, "s3cret")
		})
	}
}

// TLS to the brokers, verified against kafka.tls.caFile.
func TestKafkaOverTLS(t *testing.T) {
	if os.Getenv("KAFKA_BROKERS") != "" {
		t.Skip("needs the in-process broker's TLS setup")
	}
	certFile, keyFile, caPEM := selfSigned(t)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	brokers := kafkatest.Brokers(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	cfg := testConfig(t)
	kafkaConfig(&cfg, brokers, "audit-tls", "tls")
	cfg.Kafka.TLS = kafka.TLSConfig{Enabled: true, CAFile: testpki.WriteFile(t, t.TempDir(), "ca.crt", caPEM)}
	s := start(t, cfg)
	code, body := awaitReady(s, 15*time.Second, ready)
	require.Equal(t, 200, code, body)

	// Without the CA the certificate is refused, and readiness says so.
	cfg = testConfig(t)
	kafkaConfig(&cfg, brokers, "audit-tls", "tls-2")
	cfg.Kafka.TLS = kafka.TLSConfig{Enabled: true}
	s = start(t, cfg)
	code, body = awaitReady(s, 15*time.Second, func(_ int, body string) bool { return strings.Contains(body, "certificate") })
	require.Equal(t, 503, code)
	require.Contains(t, body, "certificate signed by unknown authority")
}
