package aggregate

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/kube-sunset/sunset/classify"
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
	a.metrics.events.WithLabelValues(source, string(classify.ResultInvalid)).Add(float64(n))
}

// CountDecodeError records n bodies, items or lines of one source that could
// not be decoded, by reason (a fixed set of values each ingest path
// defines). It does not count events: call CountInvalid for those.
func (a *Aggregator) CountDecodeError(source, reason string, n int) {
	a.metrics.decodeErrors.WithLabelValues(source, reason).Add(float64(n))
}

// CountPrefiltered adds events set aside by an ingest path to the metrics,
// as Ingest would have.
func (a *Aggregator) CountPrefiltered(source string, p classify.Prefiltered) {
	if p.OtherStage > 0 {
		a.metrics.events.WithLabelValues(source, string(classify.ResultOtherStage)).Add(float64(p.OtherStage))
	}
	if p.NotDeprecated > 0 {
		a.metrics.events.WithLabelValues(source, string(classify.ResultNotDeprecated)).Add(float64(p.NotDeprecated))
	}
}

// countDropped counts what the decoder left out of one event.
func (a *Aggregator) countDropped(source string, d classify.Dropped) {
	for _, reason := range d.Reasons() {
		a.metrics.decodeErrors.WithLabelValues(source, reason).Inc()
	}
}

// Interest says which completed requests may count: the classifier's.
func (a *Aggregator) Interest() classify.Interest { return a.cls.Interest() }

// NeedsRequestObject reports whether Ingest reads e's request object: the
// classifier's.
func (a *Aggregator) NeedsRequestObject(e *classify.Event) bool { return a.cls.NeedsRequestObject(e) }
