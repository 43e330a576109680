package aggregate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/kube-sunset/sunset/admission"
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
	// it empty.
	Resolver *admission.Resolver
}

// AdmissionSummary tells what the admission webhook counter made of a
// batch: requests with webhook annotations newly counted, and duplicates.
type AdmissionSummary struct {
	Counted    int `json:"counted"`
	Duplicates int `json:"duplicates"`
}

// TallyAdmission records what the admission counter would do with one
// event (a Planned.Admission): counted, duplicate, or nothing.
func (s *Summary) TallyAdmission(r Result) {
	if r == "" {
		return
	}
	if s.Admission == nil {
		s.Admission = &AdmissionSummary{}
	}
	if r == ResultDuplicate {
		s.Admission.Duplicates++
	} else {
		s.Admission.Counted++
	}
}

type admissionCounter struct {
	labels       *admission.Labels
	resolver     *admission.Resolver
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
		labels:   o.Labels,
		resolver: o.Resolver,
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

type webhookKey struct {
	t                      admission.Type
	configuration, webhook string
}

// request builds the admission counts of one event: a row for the
// resource's totals and one per webhook called. ok is false when the event
// has nothing to count here.
func (c *admissionCounter) request(a *Aggregator, o Origin, e *Event, now time.Time) (countkey.Request, bool) {
	f := e.Admission
	if f == nil || (e.Stage != StageResponseComplete && e.Stage != StagePanic) || e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		return countkey.Request{}, false
	}
	hour, res := a.countedHour(e, now)
	if res != ResultCounted {
		return countkey.Request{}, false
	}
	c.resolver.Resolve(f)
	ref := e.ObjectRef
	base := countkey.AdmissionKey{Hour: hour, Cluster: originCluster(o), Group: countkey.Truncate(ref.Group, countkey.MaxGroupBytes),
		Version: countkey.Truncate(ref.Version, countkey.MaxVersionBytes), Resource: countkey.Truncate(ref.Resource, countkey.MaxResourceBytes),
		Subresource: countkey.Truncate(ref.Subresource, countkey.MaxSubresourceBytes)}
	total := countkey.AdmissionCounts{Requests: 1}
	if f.Slowed() {
		total.Slow, total.LatencyNanos = 1, uint64(f.Latency())
		total.Buckets[admission.Bucket(f.Latency())] = 1
	}
	perWebhook := map[webhookKey]*countkey.AdmissionCounts{}
	var order []webhookKey
	for _, call := range f.Calls {
		// Webhook and configuration names are the sender's: bounded as
		// the DNS subdomains real ones are.
		k := webhookKey{admission.Type(countkey.Truncate(string(call.Type), countkey.MaxRuleBytes)),
			countkey.Truncate(call.Configuration, countkey.MaxRuleBytes), countkey.Truncate(call.Webhook, countkey.MaxRuleBytes)}
		wc, ok := perWebhook[k]
		if !ok {
			wc = &countkey.AdmissionCounts{Requests: 1}
			latency := f.MutatingLatency
			if call.Type == admission.Validating {
				latency = f.ValidatingLatency
			}
			// A webhook's latency is that of every webhook of its kind on
			// the request: the apiserver does not split it further.
			if latency > 0 {
				wc.Slow, wc.LatencyNanos = 1, uint64(latency)
				wc.Buckets[admission.Bucket(latency)] = 1
			}
			perWebhook[k] = wc
			order = append(order, k)
		}
		wc.Calls++
		total.Calls++
		if call.Mutated {
			wc.Mutations++
			total.Mutations++
		}
		if call.FailedOpen {
			wc.FailedOpen++
			total.FailedOpen++
		}
	}
	rows := make([]countkey.AdmissionRow, 0, 1+len(order)+len(f.Certificates))
	rows = append(rows, countkey.AdmissionRow{Key: base, Counts: total})
	for _, k := range order {
		key := base
		key.Type, key.Configuration, key.Webhook = string(k.t), k.configuration, k.webhook
		rows = append(rows, countkey.AdmissionRow{Key: key, Counts: *perWebhook[k]})
	}
	for _, issue := range f.Certificates {
		key := base
		key.Type, key.Configuration = string(issue.Problem), countkey.Truncate(issue.Host, countkey.MaxRuleBytes)
		rows = append(rows, countkey.AdmissionRow{Key: key, Counts: countkey.AdmissionCounts{Requests: 1}})
	}
	return countkey.Request{ID: e.identity(), LegacyID: e.ID, Key: countkey.CountKey{Cluster: originCluster(o), Cell: countkey.Cell{Hour: hour}}, Admission: rows}, true
}

// committed updates the metrics with what was newly counted of the
// admission requests of reqs, whose outcomes are out, and sums up; nil
// when reqs holds none.
func (c *admissionCounter) committed(o Origin, reqs []countkey.Request, out []countkey.Outcome) *AdmissionSummary {
	var sum *AdmissionSummary
	for i, r := range reqs {
		if r.Subject() != countkey.SubjectAdmission {
			continue
		}
		if sum == nil {
			sum = &AdmissionSummary{}
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
	c.events.WithLabelValues(o.Source, string(ResultCounted)).Add(float64(sum.Counted))
	c.events.WithLabelValues(o.Source, string(ResultDuplicate)).Add(float64(sum.Duplicates))
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
