// Package gke counts the Kubernetes audit logs of GKE clusters, which reach
// Sunset as Cloud Audit Logs LogEntries that a Log Router sink publishes to
// a Pub/Sub topic. A Source receives from a subscription of that topic,
// maps each entry back to the audit.k8s.io/v1 Event it stands for (entry.go
// has the mapping), has it counted like any other source's, and
// acknowledges a message only once its counts are committed: a message
// whose commit fails is handed back and redelivered, and redeliveries,
// which Pub/Sub makes at least once anyway, count once because the store
// dedupes on the request's audit ID (operation.id) and time.
package gke

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/api/option"

	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/internal/logbridge"
)

// SourceName is the source label of events read from GKE.
const SourceName = "gke"

// Options configures New.
type Options struct {
	Config   Config
	Ingester sink.Ingester
	// Tallies counts what could not be decoded or was set aside
	// undecoded; nil counts nothing.
	Tallies sink.Tallies
	Logger  zerolog.Logger
	// Registerer takes the sunset_gke_* metrics; nil means none. Sources
	// of several subscriptions may share one.
	Registerer prometheus.Registerer
	// Newest, if set, is told after each commit the newest entry time
	// committed so far (it never goes back, and ignores times more than
	// a day ahead of the clock, which are not counted either).
	Newest func(cluster string, t time.Time)
	// ClientOptions are passed to the Pub/Sub client after those Config
	// implies. Without any, the client uses Application Default
	// Credentials (Workload Identity on GKE), or PUBSUB_EMULATOR_HOST's
	// emulator when that is set.
	ClientOptions []option.ClientOption
	// Prefilter sets aside, undecoded, the entries that cannot count;
	// nil decodes every one. What it sets aside is told to Tallies.
	Prefilter *auditjson.Prefilter
}

// Source receives one subscription. Run it once.
type Source struct {
	cfg     Config
	ing     sink.Ingester
	tallies sink.Tallies
	log     zerolog.Logger
	warn    zerolog.Logger // sampled: per-message warnings
	newest  func(string, time.Time)
	// prefilter sets aside entries that cannot count; nil sets none.
	prefilter *auditjson.Prefilter
	client    *pubsub.Client
	sub       *pubsub.Subscriber
	metrics   *metrics

	// retryStart is the first pause after a failed commit or receive,
	// doubling up to 30s.
	retryStart time.Duration
	// handedOff, if set, is called when a message has been handed to the
	// commit loop: tests wait on it rather than sleep.
	handedOff func()

	mu       sync.Mutex
	ready    bool
	why      string
	reported time.Time // the newest entry time told to Newest
}

// whyStopped is Ready's reason once Run has returned.
const whyStopped = "stopped"

// maxRetry bounds the pause between attempts after failures.
const maxRetry = 30 * time.Second

// New checks the config and builds the Pub/Sub client; it does not
// contact Pub/Sub, so that a source starts while Pub/Sub is unreachable
// (Ready says why it is not receiving).
func New(ctx context.Context, o Options) (*Source, error) {
	cfg := o.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gke: %w", err)
	}
	if o.Ingester == nil {
		return nil, fmt.Errorf("gke: no Ingester")
	}
	// The client's own lines go through Sunset's logger, from info up:
	// its debug lines hold whole messages, audit events among them.
	opts := []option.ClientOption{option.WithLogger(logbridge.Slog(o.Logger, logbridge.GoogleCloud, slog.LevelInfo))}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	opts = append(opts, o.ClientOptions...)
	client, err := pubsub.NewClient(ctx, cfg.project(), opts...)
	if err != nil {
		return nil, fmt.Errorf("gke: the Pub/Sub client for %s: %w (Sunset authenticates with Application Default Credentials: on GKE, Workload Identity for its service account; elsewhere GOOGLE_APPLICATION_CREDENTIALS)", cfg.Subscription, err)
	}
	sub := client.Subscriber(cfg.Subscription)
	sub.ReceiveSettings.MaxOutstandingMessages = cfg.MaxOutstanding
	sub.ReceiveSettings.MaxOutstandingBytes = cfg.MaxOutstandingBytes
	// Flow control counts a message until its callback returns, and the
	// callback waits for the commit: MaxOutstanding and
	// MaxOutstandingBytes bound the messages held, committed or not. The
	// client extends the lease of a message held over a slow commit.
	log := o.Logger.With().Str("component", "gke").Str("cluster", cfg.Cluster).Str("subscription", cfg.Subscription).Logger()
	s := &Source{
		cfg:        cfg,
		ing:        o.Ingester,
		tallies:    sink.OrNone(o.Tallies),
		log:        log,
		warn:       log.Sample(&zerolog.BurstSampler{Burst: 10, Period: time.Minute}),
		newest:     o.Newest,
		prefilter:  o.Prefilter,
		client:     client,
		sub:        sub,
		metrics:    newMetrics(o.Registerer),
		retryStart: time.Second,
		why:        "not started: Sunset has not yet connected to " + cfg.Subscription,
	}
	s.metrics.receiving.WithLabelValues(cfg.Cluster).Set(0)
	return s, nil
}

// Ready reports whether the subscription is being received from, and if
// not, why and what to do.
func (s *Source) Ready() (ok bool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready, s.why
}

func (s *Source) setReady(ok bool, why string) {
	s.mu.Lock()
	changed := s.ready != ok || s.why != why
	s.ready, s.why = ok, why
	s.mu.Unlock()
	if !changed {
		return
	}
	switch {
	case ok:
		s.metrics.receiving.WithLabelValues(s.cfg.Cluster).Set(1)
		s.log.Info().Msg("receiving GKE audit logs")
	case why == whyStopped:
		s.metrics.receiving.WithLabelValues(s.cfg.Cluster).Set(0)
		s.log.Info().Msg("stopped receiving GKE audit logs")
	default:
		s.metrics.receiving.WithLabelValues(s.cfg.Cluster).Set(0)
		s.log.Warn().Str("why", why).Msg("not receiving GKE audit logs")
	}
}
