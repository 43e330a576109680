package gke

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are shared by every Source on one registry (one per configured
// subscription), told apart by the cluster label.
type metrics struct {
	messages       *prometheus.CounterVec
	acks           *prometheus.CounterVec
	nacks          *prometheus.CounterVec
	commitDuration *prometheus.HistogramVec
	receiving      *prometheus.GaugeVec
}

// Results of sunset_gke_messages_total besides the Reasons.
const resultOK = "ok"

// Reasons of sunset_gke_nacks_total.
const (
	nackCommitFailed = "commit_failed"
	nackStopping     = "stopping"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		messages: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_gke_messages_total",
			Help: "Pub/Sub messages received from a GKE audit log subscription, by cluster and result: ok (an audit event, handed to counting), or why the message was acknowledged without one: not_audit (another service's audit entry), wrong_payload_type (not an AuditLog entry), too_large, malformed_json, malformed_entry, bad_timestamp. A redelivered message is received again.",
		}, []string{"cluster", "result"})),
		acks: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_gke_acks_total",
			Help: "Pub/Sub messages acknowledged, by cluster: those whose counts were committed, and those that cannot count.",
		}, []string{"cluster"})),
		nacks: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_gke_nacks_total",
			Help: "Pub/Sub messages handed back for redelivery, by cluster and reason: commit_failed (the counts could not be committed) or stopping (Sunset is shutting down).",
		}, []string{"cluster", "reason"})),
		commitDuration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sunset_gke_commit_duration_seconds",
			Help:    "Time to count a batch of GKE audit log messages and commit it to badger, before the messages are acknowledged.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"cluster"})),
		receiving: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sunset_gke_receiving",
			Help: "1 while a GKE audit log subscription is being received from, 0 while it cannot be (see the readiness endpoint for why).",
		}, []string{"cluster"})),
	}
}

// register registers c on reg, or returns the collector already there: a
// second Source on the same registry shares the first one's.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		// Another metric of the same name: a programming error, as
		// promauto would report it.
		panic(err)
	}
	return c
}
