package app_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kube-sunset/sunset/aggregate"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

// aksMessages wraps the events of each captured body in the envelope AKS
// diagnostic settings write to Event Hubs, several records per message,
// in the category given.
func aksMessages(t *testing.T, category string, keep func(verb string, item []byte) bool) []kafkago.Message {
	t.Helper()
	type record struct {
		Category   string `json:"category"`
		Properties struct {
			Log string `json:"log"`
		} `json:"properties"`
	}
	var msgs []kafkago.Message
	for _, body := range capturedBodies(t) {
		var list struct{ Items []json.RawMessage }
		require.NoError(t, json.Unmarshal(body, &list))
		var recs []record
		for _, item := range list.Items {
			var e struct{ Verb string }
			require.NoError(t, json.Unmarshal(item, &e))
			if !keep(e.Verb, item) {
				continue
			}
			r := record{Category: category}
			r.Properties.Log = string(item)
			recs = append(recs, r)
			if len(recs) == 40 {
				msgs = append(msgs, kafkago.Message{Value: mustJSON(map[string]any{"records": recs})})
				recs = nil
			}
		}
		if len(recs) > 0 {
			msgs = append(msgs, kafkago.Message{Value: mustJSON(map[string]any{"records": recs})})
		}
	}
	return msgs
}

// AKS through Event Hubs' Kafka endpoint, configured as inputs/managed.md
// says: SASL PLAIN with the user $ConnectionString over TLS, the
// kube-audit category's envelope. Counts equal the independent count of
// the same events; a cluster whose setting is kube-audit-admin (no get or
// list) is warned about after a day, in a metric and in /-/ready.
func TestAKSThroughEventHubs(t *testing.T) {
	certFile, keyFile, caPEM := selfSigned(t)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	conn := "Endpoint=sb://sunset-test.servicebus.windows.net/;SharedAccessKeyName=sunset;SharedAccessKey=c2VjcmV0"
	topic := "insights-logs-kube-audit"
	brokers := kafkatest.Brokers(t, kfake.SeedTopics(2, topic), kfake.EnableSASL(), kfake.Superuser("PLAIN", "$ConnectionString", conn),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	hubs := kafkatest.PlainOverTLS(caPEM, "$ConnectionString", conn)

	var clock atomic.Int64
	clock.Store(testNow.UnixNano())
	cfg := testConfig(t)
	cfg.Kafka.Config = kafka.Config{Brokers: brokers, Topics: []string{topic}, GroupID: "sunset", Node: "master-0",
		ClusterHeader: "cluster", SessionTimeout: 2 * time.Second, BatchWait: 20 * time.Millisecond,
		TLS:  kafka.TLSConfig{Enabled: true, CAFile: testpki.WriteFile(t, t.TempDir(), "ca.crt", caPEM)},
		SASL: kafka.SASLConfig{Mechanism: "plain", Username: "$ConnectionString", Password: conn}}
	s := startWith(t, cfg, func(o *app.Options) { o.Now = func() time.Time { return time.Unix(0, clock.Load()).UTC() } })

	all := aksMessages(t, "kube-audit", func(string, []byte) bool { return true })
	// The harder case: writes that do not count either, which the
	// prefilter sets aside undecoded.
	writes := aksMessages(t, "kube-audit-admin", func(verb string, item []byte) bool {
		return verb != "get" && verb != "list" && verb != "watch" && !strings.Contains(string(item), "k8s.io/deprecated")
	})
	for i := range writes {
		writes[i].Headers = []kafkago.Header{{Key: "cluster", Value: []byte("aks-admin")}}
	}
	kafkatest.ProduceVia(t, hubs, brokers, topic, append(all, writes...)...)

	want := capturedCount(t)
	s.await(30*time.Second, func() bool {
		code, body := s.get("/apis/sunset.dev/v1/apirequestcounts?cluster=default")
		var list sunsetv1.APIRequestCountList
		if code != http.StatusOK || json.Unmarshal(body, &list) != nil {
			return false
		}
		var n int64
		for _, item := range list.Items {
			n += item.Status.RequestCount
		}
		return n == capturedDeprecated
	})
	code, body := s.get("/apis/sunset.dev/v1/apirequestcounts?cluster=default")
	require.Equal(t, http.StatusOK, code)
	want.RequireAPIRequestCounts(t, testNow, nil, body)

	// A day on, both clusters send again: default its reads, aks-admin
	// still none.
	clock.Add(int64(aggregate.ReadsWindow + time.Minute))
	kafkatest.ProduceVia(t, hubs, brokers, topic, all[0], writes[0])
	wantReady := "Sunset is ready.\nwarning: cluster aks-admin sent no get, list or watch in 24h: its reads are not logged, so deprecated reads cannot be seen (see inputs/managed.md#reads)\n"
	var ready string
	s.await(30*time.Second, func() bool {
		_, b := s.get("/-/ready?verbose")
		ready = string(b)
		return ready == wantReady
	})
	require.Equal(t, wantReady, ready)
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_cluster_reads_missing 1 when a cluster has sent events for a day and not one get, list or watch: its audit policy or log category drops reads, so deprecated reads cannot be seen.
# TYPE sunset_cluster_reads_missing gauge
sunset_cluster_reads_missing{cluster="aks-admin"} 1
sunset_cluster_reads_missing{cluster="default"} 0
`), "sunset_cluster_reads_missing"))
}
