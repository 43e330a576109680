package app_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/kafkatest"
	"github.com/kube-sunset/sunset/ingest/kafka"
)

func kafkaConfig(cfg *app.Config, brokers []string, topic, group string) {
	cfg.Kafka = kafka.Config{Brokers: brokers, Topics: []string{topic}, GroupID: group,
		SessionTimeout: 2 * time.Second, NodeHeader: "apiserver", NodeField: "hostname", BatchWait: 20 * time.Millisecond}
}

// waitForUsers polls until the users of an API in the window add up to want.
func waitForUsers(t *testing.T, s *server, name, since string, want map[string]int64) {
	t.Helper()
	var got map[string]int64
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code, body := s.get("/apis/sunset.dev/v1/apirequestcounts/" + name + "?users=100&since=" + since)
		got = map[string]int64{}
		if code == 200 {
			var obj api.APIRequestCount
			require.NoError(t, json.Unmarshal(body, &obj))
			for _, u := range obj.Status.Window.ByUser {
				got[u.UserName] = u.RequestCount
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
	}
	require.Equal(t, want, got)
}

func TestKafkaMessageShapes(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "audit", 3)
	cfg := testConfig(t)
	cfg.Retention = 8 * 365 * 24 * time.Hour // the AKS sample is from 2021
	kafkaConfig(&cfg, brokers, topic, "shapes-"+topic)
	s := start(t, cfg)

	event := func(id, user string) string { return string(mustJSON(ev(id, "kind", "Event", "apiVersion", "audit.k8s.io/v1", "user", map[string]any{"username": user}))) }
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
# HELP sunset_kafka_messages_total Kafka messages consumed, by topic and result: ok, or why the message was skipped (malformed_json, unrecognized_shape, invalid_event, empty_envelope).
# TYPE sunset_kafka_messages_total counter
sunset_kafka_messages_total{result="empty_envelope",topic=%[1]q} 1
sunset_kafka_messages_total{result="invalid_event",topic=%[1]q} 1
sunset_kafka_messages_total{result="malformed_json",topic=%[1]q} 1
sunset_kafka_messages_total{result="ok",topic=%[1]q} 12
sunset_kafka_messages_total{result="unrecognized_shape",topic=%[1]q} 1
`, topic)), "sunset_kafka_messages_total"))

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
