package gate

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	reviews   *prometheus.CounterVec
	lastError prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		reviews: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_gate_reviews_total",
			Help: "Reviews the upgrade gate answered, by source (admission, capi) and decision (allowed, refused, warned, overridden, unknown, error).",
		}, []string{"source", "decision"}),
		lastError: f.NewGauge(prometheus.GaugeOpts{
			Name: "sunset_gate_last_error_timestamp_seconds",
			Help: "When the upgrade gate last answered a review with an error (a request it could not read, or a verdict it could not reach), in seconds since the epoch; 0 if never.",
		}),
	}
	// Every series exists from the start, so that increase() sees the
	// first error.
	for _, s := range []Source{SourceAdmission, SourceCAPI} {
		for _, o := range []Outcome{Allowed, Refused, Warned, Overridden, Unknown, Error} {
			m.reviews.WithLabelValues(string(s), string(o))
		}
	}
	return m
}
