package benchmarks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/kafkatest"
)

const kafkaMessages = 20000

// BenchmarkKafka consumes the same topic of deprecated-API events with a
// bare kafka-go partition reader (the baseline: fetching alone) and with
// Sunset (fetch, decode, count, commit to badger with fsync and to the
// group). Each iteration consumes all 20,000 messages.
func BenchmarkKafka(b *testing.B) {
	brokers := kafkatest.Brokers(b)
	topic := kafkatest.Topic(b, brokers, "bench", 1)
	now := time.Now().UTC()
	msgs := make([]kafkago.Message, kafkaMessages)
	for i := range msgs {
		msgs[i] = kafkago.Message{Value: []byte(fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"bench-%d","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns/endpoints","verb":"list","user":{"username":"system:serviceaccount:ns%d:sa","groups":["system:authenticated"]},"sourceIPs":["10.0.0.1"],"userAgent":"controller/v1.2.3 (linux/amd64)","objectRef":{"resource":"endpoints","namespace":"ns","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":%q,"stageTimestamp":%q,"annotations":{"k8s.io/deprecated":"true"}}`,
			i, i%20, now.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)))}
	}
	kafkatest.Produce(b, brokers, topic, kafkago.Compression(0), msgs...)

	b.Run("kafka-go-reader", func(b *testing.B) {
		for b.Loop() {
			// The same fetch settings as Sunset's defaults.
			r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 500 * time.Millisecond})
			for n := 0; n < kafkaMessages; n++ {
				if _, err := r.FetchMessage(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			_ = r.Close()
		}
		b.ReportMetric(float64(kafkaMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("sunset", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			url, stop := startSunset(b, func(cfg *app.Config) {
				cfg.Kafka = kafka.Config{Brokers: brokers, Topics: []string{topic}, GroupID: fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano()), SessionTimeout: 2 * time.Second}
			})
			for !countedAll(url + "/metrics") {
				time.Sleep(5 * time.Millisecond)
			}
			stop()
		}
		b.ReportMetric(float64(kafkaMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// countedAll reports whether /metrics shows every message counted.
func countedAll(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return err == nil && strings.Contains(string(body), fmt.Sprintf("sunset_ingest_events_total{result=\"counted\",source=\"kafka\"} %d\n", kafkaMessages))
}
