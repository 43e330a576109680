package eks

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// Results of a FilterLogEvents call, each attempt the SDK makes counted.
const (
	requestOK        = "ok"
	requestThrottled = "throttled"
	requestError     = "error"
)

// What became of a log event of the audit streams.
const (
	eventNew        = "new"
	eventDuplicate  = "duplicate"
	eventUnreadable = "unreadable"
)

// metrics are one cluster's series. The collectors are shared by every
// source on a registry, each cluster (from the config, so bounded) its
// own series.
type metrics struct {
	// The vectors are curried with the cluster: the label left is result
	// or reason.
	requests   *prometheus.CounterVec
	events     *prometheus.CounterVec
	unreadable *prometheus.CounterVec
	truncated  prometheus.Counter
	watermark  prometheus.Gauge
	lastPoll   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, cluster string) (*metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunset_eks_requests_total",
		Help: "FilterLogEvents calls to CloudWatch Logs, every attempt of the SDK's retries counted, by cluster and result: ok, throttled (over the account's quota of 5 a second; the SDK slows down and retries), error.",
	}, []string{"cluster", "result"})
	events := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunset_eks_events_total",
		Help: "Log events read from the audit streams, by cluster and result: new (handed to the aggregator, which decides what counts), duplicate (read before, in the overlap that every poll reads again), unreadable (not an audit event; by reason in sunset_eks_unreadable_events_total).",
	}, []string{"cluster", "result"})
	unreadable := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunset_eks_unreadable_events_total",
		Help: "Log events of the audit streams that are not audit events, by cluster and reason; they are passed over.",
	}, []string{"cluster", "reason"})
	truncated := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunset_eks_truncated_events_total",
		Help: "Audit events CloudWatch cut at its 256 KB limit, by cluster. Their complete leading fields are counted; their annotations are lost, so they count as deprecated only by the catalog (set the cluster's version).",
	}, []string{"cluster"})
	watermark := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sunset_eks_watermark_timestamp_seconds",
		Help: "Time of the newest log event committed, by cluster, in Unix seconds; each poll reads again from the overlap before it.",
	}, []string{"cluster"})
	lastPoll := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sunset_eks_last_poll_success_timestamp_seconds",
		Help: "When the last poll of the log group read it to the end and committed, by cluster, in Unix seconds.",
	}, []string{"cluster"})
	var err error
	m := &metrics{}
	if m.requests, err = register(reg, requests); err != nil {
		return nil, err
	}
	if m.events, err = register(reg, events); err != nil {
		return nil, err
	}
	if m.unreadable, err = register(reg, unreadable); err != nil {
		return nil, err
	}
	tr, err := register(reg, truncated)
	if err != nil {
		return nil, err
	}
	wm, err := register(reg, watermark)
	if err != nil {
		return nil, err
	}
	lp, err := register(reg, lastPoll)
	if err != nil {
		return nil, err
	}
	own := prometheus.Labels{"cluster": cluster}
	m.requests, m.events, m.unreadable = m.requests.MustCurryWith(own), m.events.MustCurryWith(own), m.unreadable.MustCurryWith(own)
	m.truncated, m.watermark, m.lastPoll = tr.With(own), wm.With(own), lp.With(own)
	// Every series from the start, so that rates and alerts see zeros.
	for _, r := range []string{requestOK, requestThrottled, requestError} {
		m.requests.WithLabelValues(r)
	}
	for _, r := range []string{eventNew, eventDuplicate, eventUnreadable} {
		m.events.WithLabelValues(r)
	}
	for _, r := range []auditjson.Reason{auditjson.ReasonMalformedJSON, auditjson.ReasonMalformedEvent, auditjson.ReasonWrongKind,
		auditjson.ReasonWrongAPIVersion, auditjson.ReasonMissingStage, auditjson.ReasonBadTimestamp, ReasonTooLarge} {
		m.unreadable.WithLabelValues(string(r))
	}
	return m, nil
}

// register registers c on reg, or returns the collector of the same name
// registered already: several clusters' sources share a registry. A nil
// reg registers nothing.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("eks: registering metrics: %w", err)
}
