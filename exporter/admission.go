package exporter

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/countkey"
)

// AdmissionQuerier reads admission webhook counts. *store.Store implements
// it.
type AdmissionQuerier interface {
	ScanAdmission(from, to time.Time, fn func(countkey.AdmissionKey, countkey.AdmissionCounts) error) error
}

// AdmissionOptions configures NewAdmission.
type AdmissionOptions struct {
	Querier AdmissionQuerier
	// Labels bounds label values; share it with the aggregator so a
	// resource has the same labels in every metric.
	Labels *admission.Labels
	// Window, Grace and Refresh work as in Options.
	Window, Grace, Refresh time.Duration
	Now                    func() time.Time
}

// Values of the result label of sunset_admission_webhook_calls.
const (
	ResultMutated    = "mutated"
	ResultUnchanged  = "unchanged"
	ResultFailedOpen = "failed_open"
)

var admissionCallsDesc = prometheus.NewDesc("sunset_admission_webhook_calls",
	"Admission webhook calls in the sliding window (metrics.window), from the audit annotations, by resource, webhook and result (mutated, unchanged, failed_open). Validating webhooks leave an annotation only when they fail open. Falls to 0 when calls stop; the series disappears after metrics.grace.",
	[]string{"cluster", "group", "version", "resource", "subresource", "class", "type", "configuration", "webhook", "result"}, nil)

// AdmissionCollector is a prometheus.Collector of the admission webhook
// gauges, computed from the store at scrape time like Collector's.
type AdmissionCollector struct {
	o     AdmissionOptions
	cache cache
}

// NewAdmission builds an AdmissionCollector; register it on the server's
// registry.
func NewAdmission(o AdmissionOptions) *AdmissionCollector {
	defaultWindow(&o.Window, &o.Grace, &o.Now)
	if o.Labels == nil {
		o.Labels = admission.NewLabels(admission.LabelOptions{})
	}
	return &AdmissionCollector{o: o}
}

// Describe implements prometheus.Collector.
func (c *AdmissionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- admissionCallsDesc }

// Collect implements prometheus.Collector.
func (c *AdmissionCollector) Collect(ch chan<- prometheus.Metric) {
	ms, err := c.cache.get(c.o.Now(), c.o.Refresh, c.compute)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(admissionCallsDesc, err)
		return
	}
	for _, m := range ms {
		ch <- m
	}
}

type callsKey struct {
	cluster string
	res     admission.ResourceLabels
	typ     string
	webhook admission.WebhookID
	result  string
}

func (c *AdmissionCollector) compute(now time.Time) ([]prometheus.Metric, error) {
	cur := now.UTC().Truncate(time.Hour)
	windowStart := cur.Add(-c.o.Window + time.Hour)
	graceStart := windowStart.Add(-c.o.Grace)
	calls := map[callsKey]float64{}
	err := c.o.Querier.ScanAdmission(graceStart, cur, func(k countkey.AdmissionKey, n countkey.AdmissionCounts) error {
		if k.IsTotal() {
			return nil
		}
		base := callsKey{cluster: k.Cluster, res: c.o.Labels.Resource(k.Group, k.Version, k.Resource, k.Subresource), typ: k.Type,
			webhook: c.o.Labels.Webhook(admission.WebhookID{Configuration: k.Configuration, Webhook: k.Webhook})}
		unchanged := n.Calls - min(n.Calls, n.Mutations+n.FailedOpen)
		for result, v := range map[string]uint64{ResultMutated: n.Mutations, ResultFailedOpen: n.FailedOpen, ResultUnchanged: unchanged} {
			if v == 0 {
				continue
			}
			key := base
			key.result = result
			if k.Hour.Before(windowStart) {
				calls[key] += 0 // seen in the grace period: shown as 0
				continue
			}
			calls[key] += float64(v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]prometheus.Metric, 0, len(calls))
	for k, v := range calls {
		out = append(out, prometheus.MustNewConstMetric(admissionCallsDesc, prometheus.GaugeValue, v, k.cluster,
			k.res.Group, k.res.Version, k.res.Resource, k.res.Subresource, string(k.res.Class), k.typ,
			k.webhook.Configuration, k.webhook.Webhook, k.result))
	}
	return out, nil
}
