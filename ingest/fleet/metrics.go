package fleet

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Roles that produce records; values of the role label.
const (
	roleFilter  = "filter"
	roleForward = "forward"
)

type metrics struct {
	produced      *prometheus.CounterVec
	produceErrors *prometheus.CounterVec
	records       *prometheus.CounterVec
	unsigned      *prometheus.CounterVec
	lag           *prometheus.GaugeVec
	caughtUp      prometheus.Gauge
	outbox        prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		produced: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_fleet_records_produced_total",
			Help: "Request records acknowledged by the fleet's topic, by role: filter (from the audit topics) or forward (from the webhook and files).",
		}, []string{"role"}),
		produceErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_fleet_produce_errors_total",
			Help: "Failed attempts to produce request records to the fleet's topic, by role; the records are sent again.",
		}, []string{"role"}),
		records: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_fleet_records_total",
			Help: "Request records read from the fleet's topic, by result: ok; bad_removed_release, counted without its removedRelease, which is not a release such as 1.37; or why one was skipped (malformed, unknown_version, unknown_field, too_long, future, too_large: a record batch that decompresses to more than kafka.maxDecompressedBytes, counted once per batch; with kafka.fleet keys, unsigned, unknown_key: no key of the record's cluster has its key id, bad_signature).",
		}, []string{"result"}),
		unsigned: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_fleet_records_unsigned_total",
			Help: "Requests not sent to the fleet's topic because this replica holds no kafka.fleet key of their cluster, by role.",
		}, []string{"role"}),
		lag: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sunset_fleet_consumer_lag",
			Help: "Records in a partition of the fleet's topic after the last one counted, as of the last batch.",
		}, []string{"partition"}),
		caughtUp: f.NewGauge(prometheus.GaugeOpts{
			Name: "sunset_fleet_caught_up",
			Help: "1 once every partition of the fleet's topic was counted up to where it ended when this replica started.",
		}),
		outbox: f.NewGauge(prometheus.GaugeOpts{
			Name: "sunset_fleet_outbox_batches",
			Help: "Committed batches of requests waiting to be forwarded to the fleet's topic.",
		}),
	}
	for _, r := range []string{roleFilter, roleForward} {
		m.produced.WithLabelValues(r)
		m.produceErrors.WithLabelValues(r)
		m.unsigned.WithLabelValues(r)
	}
	for _, r := range []string{"ok", reasonBadRemovedRelease, reasonMalformed, reasonNewVersion, reasonUnknownField, reasonTooLong, reasonFuture,
		reasonUnsigned, reasonUnknownKey, reasonBadSignature} {
		m.records.WithLabelValues(r)
	}
	return m
}
