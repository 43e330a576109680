package kafka

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	messages       *prometheus.CounterVec
	lag            *prometheus.GaugeVec
	commitDuration prometheus.Histogram
	connected      prometheus.Gauge
	unconsumed     *prometheus.GaugeVec
	rejoins        prometheus.Counter
	assigned       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		messages: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_kafka_messages_total",
			Help: "Kafka messages consumed, by topic and result: ok, or why the message was skipped (malformed_json, unrecognized_shape, invalid_event, empty_envelope, too_large: in a record batch or message that decompresses to more than kafka.maxDecompressedBytes, cluster_not_allowed: of a topic in kafka.topicClusters, naming a cluster the topic may not speak for, unstorable: its events cannot be stored even alone).",
		}, []string{"topic", "result"}),
		lag: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sunset_kafka_consumer_lag",
			Help: "Messages in a partition after the last one committed, as of the last batch.",
		}, []string{"topic", "partition"}),
		commitDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "sunset_kafka_commit_duration_seconds",
			Help:    "Time to count a batch of Kafka messages and commit its offsets, to badger and to the group.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		connected: f.NewGauge(prometheus.GaugeOpts{
			Name: "sunset_kafka_connected",
			Help: "1 while the Kafka consumer is in its consumer group.",
		}),
		unconsumed: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sunset_kafka_partitions_unconsumed",
			Help: "Partitions of a topic whose messages have waited, with no commit from any member of the consumer group, for longer than two session timeouts and a rebalance timeout (at least 10s), as of the last look (each session timeout).",
		}, []string{"topic"}),
		rejoins: f.NewCounter(prometheus.CounterOpts{
			Name: "sunset_kafka_group_rejoins_total",
			Help: "Times the consumer left its consumer group and joined again because partitions it does not hold had no consumer, so that the group rebalanced without members that are gone.",
		}),
		assigned: f.NewGauge(prometheus.GaugeOpts{
			Name: "sunset_kafka_partitions_assigned",
			Help: "Partitions the consumer group assigned to this consumer in its last generation; those beyond kafka.maxPartitions are read outside kafka.memoryBudget.",
		}),
	}
}
