package aggregate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// The admission webhook counter is the second, independent counter of the
// pipeline: from the same events it counts, per cluster, resource, hour and
// webhook, the calls, mutations, failed-open calls and the requests slowed
// by webhooks, and per webhook server the requests on which kube-apiserver
// flagged its serving certificate. Its dedupe marks are its own, so a
// request both deprecated and seen by webhooks counts once in each counter.
//
// A server's certificate problem is a row of its own: Type is the problem
// (admission.InsecureSHA1 or admission.MissingSAN), Configuration the host
// the annotation names, Webhook empty (kube-apiserver names no webhook),
// and only Requests set. Rows of webhooks always have a webhook name.

// AdmissionOptions configures the admission webhook counter.
type AdmissionOptions struct {
	// Labels bounds the metric labels; nil means the default classes and
	// caps.
	Labels *admission.Labels
	// Resolver names the configuration of validating webhooks; nil leaves
	// it empty. The classifier resolves them.
	Resolver *admission.Resolver
}

type admissionCounter struct {
	labels       *admission.Labels
	events       *prometheus.CounterVec
	invalid      prometheus.Counter
	latency      *prometheus.HistogramVec
	certificates *prometheus.CounterVec
}

const foldedHelp = "Distinct resources (kind=resource) or webhooks (kind=webhook) beyond the admission.metrics caps, whose admission metrics are labelled \"other\"."

func newAdmissionCounter(o AdmissionOptions, reg prometheus.Registerer) admissionCounter {
	if o.Labels == nil {
		o.Labels = admission.NewLabels(admission.LabelOptions{})
	}
	f := promauto.With(reg)
	buckets := make([]float64, len(admission.LatencyBounds))
	for i, b := range admission.LatencyBounds {
		buckets[i] = b.Seconds()
	}
	labels := o.Labels
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "sunset_admission_metric_labels_folded",
		Help:        foldedHelp,
		ConstLabels: prometheus.Labels{"kind": "resource"},
	}, func() float64 { r, _ := labels.Folded(); return float64(r) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "sunset_admission_metric_labels_folded",
		Help:        foldedHelp,
		ConstLabels: prometheus.Labels{"kind": "webhook"},
	}, func() float64 { _, w := labels.Folded(); return float64(w) })
	return admissionCounter{
		labels: o.Labels,
		events: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_admission_events_total",
			Help: "Requests with admission webhook annotations, by source and what became of them (counted, duplicate).",
		}, []string{"source", "result"}),
		invalid: f.NewCounter(prometheus.CounterOpts{
			Name: "sunset_admission_annotations_invalid_total",
			Help: "Admission webhook annotations that could not be read and were left out.",
		}),
		latency: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sunset_admission_webhook_latency_seconds",
			Help:    "Time requests spent in admission webhooks, all webhooks together, per resource: one observation per request that kube-apiserver annotated with webhook latency (requests slower than 500 ms).",
			Buckets: buckets,
		}, []string{"cluster", "group", "version", "resource", "subresource", "class"}),
		certificates: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_admission_webhook_certificate_problems_total",
			Help: "Webhook servers whose serving certificate kube-apiserver flagged, one per newly counted request and server, by problem: insecure-sha1 (a SHA-1 signature) or missing-san (no subjectAltName). Current kube-apiserver releases refuse both.",
		}, []string{"cluster", "problem"}),
	}
}

// committed updates the metrics with what was newly counted of the
// admission requests of reqs, whose outcomes are out, and sums up; nil
// when reqs holds none.
func (c *admissionCounter) committed(o classify.Origin, reqs []countkey.Request, out []countkey.Outcome) *classify.AdmissionSummary {
	var sum *classify.AdmissionSummary
	for i, r := range reqs {
		if r.Subject() != countkey.SubjectAdmission {
			continue
		}
		if sum == nil {
			sum = &classify.AdmissionSummary{}
		}
		if out[i].Duplicate {
			sum.Duplicates++
			continue
		}
		sum.Counted++
		c.countCertificates(r)
		total := r.Admission[0]
		if total.Counts.Slow == 0 {
			continue
		}
		k := total.Key
		l := c.labels.Resource(k.Group, k.Version, k.Resource, k.Subresource)
		c.latency.WithLabelValues(k.Cluster, l.Group, l.Version, l.Resource, l.Subresource, string(l.Class)).
			Observe(time.Duration(total.Counts.LatencyNanos).Seconds())
	}
	if sum == nil {
		return nil
	}
	c.events.WithLabelValues(o.Source, string(classify.ResultCounted)).Add(float64(sum.Counted))
	c.events.WithLabelValues(o.Source, string(classify.ResultDuplicate)).Add(float64(sum.Duplicates))
	return sum
}

// countCertificates adds a request's certificate rows to their counter.
// Both problems' series of the cluster exist from its first counted
// request on, at zero until one is flagged, so that an alert on their
// increase sees the first one.
func (c *admissionCounter) countCertificates(r countkey.Request) {
	for _, rule := range admission.CertificateRules {
		n := 0
		for _, row := range r.Admission[1:] {
			if row.Key.Webhook == "" && row.Key.Type == string(rule.Problem) {
				n++
			}
		}
		c.certificates.WithLabelValues(r.Key.Cluster, string(rule.Problem)).Add(float64(n))
	}
}
