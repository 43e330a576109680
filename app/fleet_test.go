package app_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/ingest/fleet"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// eventually waits until cond holds, checking it at each line s logs, and
// fails the test after within.
func (s *server) eventually(within time.Duration, what string, cond func() bool) {
	s.t.Helper()
	s.await(within, cond)
	require.True(s.t, cond(), what)
}

// metricValue is the value of one series of a counter or gauge, 0 when it
// does not exist.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// usersOf reads an API's requests per user in one cluster over the last
// day; an API with no requests gives an empty map.
func usersOf(t *testing.T, s *server, name, cluster string) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	code, body := s.get("/apis/sunset.dev/v1/apirequestcounts/" + name + "?users=100&since=24h&cluster=" + cluster)
	if code != 200 {
		return got
	}
	var obj sunsetv1.APIRequestCount
	require.NoError(t, json.Unmarshal(body, &obj))
	for _, u := range obj.Status.Window.ByUser {
		got[u.UserName] = u.RequestCount
	}
	return got
}

func fleetConfig(cfg *config.Config, brokers []string, fleetTopic string) {
	cfg.Kafka = config.KafkaConfig{Config: kafka.Config{Brokers: brokers, SessionTimeout: 2 * time.Second,
		BatchWait: 20 * time.Millisecond, ClusterHeader: "cluster"}, Fleet: fleet.Config{Topic: fleetTopic}}
}

// Two replicas share the filtering of one audit topic in a group and each
// counts the whole fleet's topic: both answer for both clusters, exactly,
// duplicates on other partitions included.
func TestFleetReplicasAnswerForTheWholeFleet(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	raw := kafkatest.Topic(t, brokers, "audit-fleet", 4)
	requests := kafkatest.Topic(t, brokers, "sunset.requests", 3)
	var replicas []*server
	for range 2 {
		cfg := testConfig(t)
		fleetConfig(&cfg, brokers, requests)
		cfg.Kafka.Topics, cfg.Kafka.GroupID = []string{raw}, "filter-"+raw
		replicas = append(replicas, start(t, cfg))
	}
	for _, s := range replicas {
		s.eventually(30*time.Second, "replica ready", func() bool { code, _ := s.get("/-/ready"); return code == 200 })
	}

	want := map[string]map[string]int64{"east": {}, "west": {}}
	var msgs []kafkago.Message
	produced := 0
	for i := range 600 {
		cluster := []string{"east", "west"}[i%2]
		user := fmt.Sprintf("user-%d", i%5)
		id := fmt.Sprintf("fleet-%d", i)
		deprecated := i%3 == 0
		e := ev(id, "user", map[string]any{"username": user})
		if !deprecated {
			e = ev(id, "user", map[string]any{"username": user}, "annotations", nil, "objectRef", map[string]any{"resource": "pods", "apiVersion": "v1"})
		}
		m := kafkago.Message{Key: []byte(id), Value: mustJSON(e), Headers: []kafkago.Header{{Key: "cluster", Value: []byte(cluster)}}}
		msgs = append(msgs, m)
		if deprecated {
			want[cluster][user]++
			produced++
			if i%9 == 0 {
				// Sent again under another key: another partition.
				m.Key = []byte(id + "-again")
				msgs = append(msgs, m)
				produced++
			}
		}
	}
	kafkatest.Produce(t, brokers, raw, kafkago.Compression(0), msgs...)

	for i, s := range replicas {
		for cluster, users := range want {
			s.eventually(30*time.Second, fmt.Sprintf("replica %d, cluster %s", i, cluster), func() bool {
				return fmt.Sprint(usersOf(t, s, "endpoints.v1", cluster)) == fmt.Sprint(users)
			})
		}
	}
	filtered := 0.0
	for _, s := range replicas {
		require.Equal(t, 200.0, metricValue(t, s.reg, "sunset_ingest_events_total", map[string]string{"source": "fleet", "result": "counted"}))
		filtered += metricValue(t, s.reg, "sunset_fleet_records_produced_total", map[string]string{"role": "filter"})
	}
	// 200 deprecated requests (i = 0, 3, ..., 597) and 67 copies (i = 0,
	// 9, ..., 594) went through the two filters.
	require.Equal(t, 267, produced)
	require.Equal(t, float64(produced), filtered)
}

// A webhook-fed Sunset forwards what it counts through its outbox: while
// Kafka is unreachable the webhook still answers 200 and counts locally,
// the outbox survives a restart, and once the broker is up a counting
// replica answers for the webhook's cluster. A re-sent batch changes
// nothing.
func TestFleetForwardKeepsRequestsThroughAKafkaOutage(t *testing.T) {
	if os.Getenv("KAFKA_BROKERS") != "" {
		t.Skip("stops and starts its own broker")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	brokers := []string{"127.0.0.1:" + strconv.Itoa(port)}

	edge := testConfig(t)
	fleetConfig(&edge, brokers, "sunset.requests")
	edge.DefaultCluster, edge.Kafka.Forward = "edge", true
	off := false
	edge.Kafka.Fleet.Count = &off
	a := start(t, edge)
	code, body := a.get("/-/ready")
	require.Equal(t, 200, code, "forwarding alone never holds readiness: %s", body)

	want := map[string]int64{}
	var batches [][]byte
	for b := range 3 {
		var items []map[string]any
		for i := range 10 {
			user := fmt.Sprintf("edge-user-%d", i%3)
			items = append(items, ev(fmt.Sprintf("edge-%d-%d", b, i), "user", map[string]any{"username": user}))
			want[user]++
		}
		batches = append(batches, eventList(items...))
		code, body := a.post("/audit/webhook/master-0", "application/json", batches[b])
		require.Equal(t, 200, code, string(body))
		require.JSONEq(t, `{"cluster":"edge","node":"master-0","counted":10,"duplicates":0,"skipped":0,"invalid":0}`, string(body))
	}
	require.Equal(t, want, usersOf(t, a, "endpoints.v1", "edge"), "counted locally while Kafka is down")
	a.eventually(20*time.Second, "three batches wait in the outbox", func() bool {
		return metricValue(t, a.reg, "sunset_fleet_outbox_batches", nil) == 3
	})
	a.stop()

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.GroupMinSessionTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	requests := kafkatest.Topic(t, brokers, "sunset.requests", 2)
	edge.Kafka.Fleet.Topic = requests
	// The outbox is not tied to a topic name: it goes wherever the
	// restarted Sunset forwards.
	a = start(t, edge)

	central := testConfig(t)
	fleetConfig(&central, brokers, requests)
	b := start(t, central)
	b.eventually(30*time.Second, "the central replica counts the edge cluster", func() bool {
		return fmt.Sprint(usersOf(t, b, "endpoints.v1", "edge")) == fmt.Sprint(want)
	})
	a.eventually(10*time.Second, "the outbox is empty", func() bool {
		return metricValue(t, a.reg, "sunset_fleet_outbox_batches", nil) == 0
	})
	require.Equal(t, 30.0, metricValue(t, b.reg, "sunset_ingest_events_total", map[string]string{"source": "fleet", "result": "counted"}))

	// The apiserver re-sends a batch: a duplicate here and there.
	code, body = a.post("/audit/webhook/master-0", "application/json", batches[1])
	require.Equal(t, 200, code, string(body))
	require.JSONEq(t, `{"cluster":"edge","node":"master-0","counted":0,"duplicates":10,"skipped":0,"invalid":0}`, string(body))
	b.eventually(20*time.Second, "the copies reach the central replica", func() bool {
		return metricValue(t, b.reg, "sunset_ingest_events_total", map[string]string{"source": "fleet", "result": "duplicate"}) == 10
	})
	require.Equal(t, want, usersOf(t, b, "endpoints.v1", "edge"))
	require.Equal(t, 30.0, metricValue(t, b.reg, "sunset_ingest_events_total", map[string]string{"source": "fleet", "result": "counted"}))
}

// A counting replica whose topic does not exist is not ready and says what
// to do; once the topic exists it becomes ready.
func TestFleetMissingTopicIsAReadinessError(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := fmt.Sprintf("sunset.requests-%d", time.Now().UnixNano())
	cfg := testConfig(t)
	fleetConfig(&cfg, brokers, topic)
	s := start(t, cfg)
	var body []byte
	s.eventually(20*time.Second, "readiness names the missing topic", func() bool {
		var code int
		code, body = s.get("/-/ready?verbose")
		return code == 503 && string(body) != "Sunset is not ready: fleet: not connected yet\n"
	})
	require.Equal(t, "Sunset is not ready: fleet: topic "+topic+" does not exist; create it (kafka-topics.sh --create --topic "+topic+" --partitions 6)\n", string(body))

	kafkatest.CreateTopic(t, brokers, topic, 2)
	s.eventually(20*time.Second, "ready once the topic exists", func() bool {
		code, _ := s.get("/-/ready")
		return code == 200
	})
}
