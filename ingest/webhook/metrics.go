package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	requests   *prometheus.CounterVec
	duration   prometheus.Histogram
	overloaded prometheus.Counter
	overShare  prometheus.Counter
	forbidden  prometheus.Counter
	tooSlow    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_webhook_requests_total",
			Help: "Audit webhook batches answered, by HTTP status code.",
		}, []string{"code"}),
		duration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "sunset_webhook_request_duration_seconds",
			Help:    "Time from receiving an audit webhook batch to answering it, commit included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		overloaded: f.NewCounter(prometheus.CounterOpts{
			Name: "sunset_webhook_overloaded_total",
			Help: "Audit webhook batches answered 429 because too many were in flight.",
		}),
		overShare: f.NewCounter(prometheus.CounterOpts{
			Name: "sunset_webhook_over_share_total",
			Help: "Audit webhook batches answered 429 because their credentials held their share of the batch slots (max-inflight-batches-per-credential) already.",
		}),
		tooSlow: f.NewCounter(prometheus.CounterOpts{
			Name: "sunset_webhook_slow_bodies_total",
			Help: "Audit webhook batches answered 408: the body did not start in time, or came slower than min-body-bytes-per-second.",
		}),
		forbidden: f.NewCounter(prometheus.CounterOpts{
			Name: "sunset_webhook_forbidden_total",
			Help: "Audit webhook batches answered 403: valid credentials of one apiserver posting as another.",
		}),
	}
	for _, code := range []string{"200", "400", "401", "403", "408", "413", "415", "429", "500", "503"} {
		m.requests.WithLabelValues(code)
	}
	return m
}

func (m *metrics) observe(code int, d time.Duration) {
	m.requests.WithLabelValues(codeLabel(code)).Inc()
	m.duration.Observe(d.Seconds())
}
