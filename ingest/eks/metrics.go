package eks

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// Results of a CloudWatch Logs call, each attempt the SDK makes counted.
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

// The CloudWatch Logs calls a source makes, the operation label of
// sunset_eks_requests_total.
const (
	opDescribeLogStreams = "DescribeLogStreams"
	opFilterLogEvents    = "FilterLogEvents"
)

// metrics are one config entry's series. The collectors are shared by
// every source on a registry, each entry its own series: labelled by its
// cluster and by the entry (its name, else its log group), both from the
// config, so bounded. Two entries of one cluster, reading two log groups,
// so never share a series, and one cannot hide the other's errors.
type metrics struct {
	// The vectors are curried with the cluster and entry: the labels
	// left are the operation and result, or the reason.
	requests   *prometheus.CounterVec
	events     *prometheus.CounterVec
	unreadable *prometheus.CounterVec
	truncated  prometheus.Counter
	late       prometheus.Counter
	watermark  prometheus.Gauge
	lastPoll   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, cluster, entry string) (*metrics, error) {
	own := []string{"cluster", "entry"}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunset_eks_requests_total",
		Help: "CloudWatch Logs calls, every attempt of the SDK's retries counted, by cluster, config entry, operation (DescribeLogStreams, FilterLogEvents) and result: ok, throttled (over the account's quota; the SDK slows down and retries), error.",
	}, append(own, "operation", "result"))
	events := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunset_eks_events_total",
		Help: "Log events read from the audit streams, by cluster, config entry and result: new (read for the first time: handed to the aggregator, which decides what counts, or set aside by the pre-filter), duplicate (read before, in a sweep that reads a stream again), unreadable (not an audit event; by reason in sunset_eks_unreadable_events_total).",
	}, append(own, "result"))
	unreadable := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunset_eks_unreadable_events_total",
		Help: "Log events of the audit streams that are not audit events, by cluster, config entry and reason; they are passed over.",
	}, append(own, "reason"))
	truncated := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunset_eks_truncated_events_total",
		Help: "Audit events CloudWatch cut at its 256 KB limit, by cluster and config entry. Their complete leading fields are counted; their annotations are lost, so they count as deprecated only by the catalog (set the cluster's version).",
	}, own)
	late := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunset_eks_late_events_total",
		Help: "Log events that arrived over an overlap behind their stream's newest, by cluster and config entry, found by a sweep that looks one overlap further back. They are among the new events and count if the store has not counted their requests; any arriving later still are missed: raise the entry's overlap.",
	}, own)
	watermark := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sunset_eks_watermark_timestamp_seconds",
		Help: "Time of the newest log event committed, of all the audit streams, by cluster and config entry, in Unix seconds.",
	}, own)
	lastPoll := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sunset_eks_last_poll_success_timestamp_seconds",
		Help: "When the last poll of the log group read every audit stream to its end and committed, by cluster and config entry, in Unix seconds.",
	}, own)
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
	lt, err := register(reg, late)
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
	labels := prometheus.Labels{"cluster": cluster, "entry": entry}
	m.requests, m.events, m.unreadable = m.requests.MustCurryWith(labels), m.events.MustCurryWith(labels), m.unreadable.MustCurryWith(labels)
	m.truncated, m.late, m.watermark, m.lastPoll = tr.With(labels), lt.With(labels), wm.With(labels), lp.With(labels)
	// Every series from the start, so that rates and alerts see zeros.
	for _, op := range []string{opDescribeLogStreams, opFilterLogEvents} {
		for _, r := range []string{requestOK, requestThrottled, requestError} {
			m.requests.WithLabelValues(op, r)
		}
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

// operation is the CloudWatch Logs operation a call's context is for,
// as a bounded label value.
func operation(ctx context.Context) string {
	if middleware.GetOperationName(ctx) == opDescribeLogStreams {
		return opDescribeLogStreams
	}
	return opFilterLogEvents
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
