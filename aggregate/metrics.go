package aggregate

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// requestsMetric is sunset_deprecated_requests_total, whose label values
// come from senders and are bounded.
const requestsMetric = "sunset_deprecated_requests_total"

var requestsLabels = []string{"cluster", "group", "version", "resource", "subresource", "removed_release", "verb", "dry_run", "system", "state"}

type metrics struct {
	events       *prometheus.CounterVec
	requests     *prometheus.CounterVec
	decodeErrors *prometheus.CounterVec
}

// newMetrics registers the aggregator's metrics on reg; a nil reg gives
// working but unregistered metrics.
func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		events: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_ingest_events_total",
			Help: "Audit events received, by source and what became of them (counted, duplicate, skipped_stage, not_deprecated, no_object_ref, expired, future, invalid, too_long).",
		}, []string{"source", "result"}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: requestsMetric,
			Help: "Requests to deprecated or removed APIs counted since start (duplicates excluded). state is deprecated or removed (the client got a 404).",
		}, requestsLabels),
		decodeErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_ingest_decode_errors_total",
			Help: "Bodies and events that could not be decoded, by source and reason.",
		}, []string{"source", "reason"}),
	}
}

// CountInvalid records events that ingest could not decode, so that all
// event outcomes share one metric.
func (a *Aggregator) CountInvalid(source string, n int) {
	a.metrics.events.WithLabelValues(source, string(ResultInvalid)).Add(float64(n))
}

// CountDecodeError records n bodies, items or lines of one source that could
// not be decoded, by reason (a fixed set of values each ingest path
// defines). It does not count events: call CountInvalid for those.
func (a *Aggregator) CountDecodeError(source, reason string, n int) {
	a.metrics.decodeErrors.WithLabelValues(source, reason).Add(float64(n))
}
