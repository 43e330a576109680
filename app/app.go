// Package app assembles a running Sunset server from its parts: store,
// aggregator, webhook, read API and ops endpoints, and owns their lifecycle.
//
// It does not parse flags or handle signals; cmd/sunset does, so tests can
// embed a whole server with New and Run.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/access"
	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/exporter"
	"github.com/kube-sunset/sunset/ingest/file"
	"github.com/kube-sunset/sunset/ingest/fleet"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/ingest/webhook"
	"github.com/kube-sunset/sunset/internal/selfsigned"
	"github.com/kube-sunset/sunset/ops"
	"github.com/kube-sunset/sunset/parts"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/store"
)

// Serve runs the server cfg describes until ctx is done or a component
// fails, logging through logger (NewLogger's, which the caller also hands
// the libraries that log through process-global loggers).
func Serve(ctx context.Context, cfg config.Config, logger zerolog.Logger, build BuildInfo) error {
	a, err := New(cfg, Options{Logger: logger, Build: build})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Options are what the caller provides beyond config.Config.
type Options struct {
	Logger zerolog.Logger
	// Registry receives every metric and is served on /metrics. Nil means a
	// fresh registry with the Go and process collectors.
	Registry *prometheus.Registry
	// Now is the clock; nil means time.Now.
	Now   func() time.Time
	Build BuildInfo
	// Starting and Draining, if set, are called while the server answers
	// HTTP but is not ready: Starting once it listens and before it turns
	// ready, Draining once a shutdown has begun and new batches are
	// refused, before the batches in flight are waited for. Tests use them
	// to look at the server in those states.
	Starting, Draining func()
}

// state is where the server is in its life, for /-/ready.
type state int32

const (
	stateStarting state = iota
	stateReady
	stateDraining
)

// App is a Sunset server, built and listening but not yet serving.
type App struct {
	cfg       config.Config
	followers []*file.Follower
	managed   []managedSource
	kafka     *kafka.Consumer
	fleet     *fleet.Fleet
	log       zerolog.Logger
	parts     *parts.Parts
	store     *store.Store
	agg       *aggregate.Aggregator
	srv       *http.Server
	access    *access.Access
	certs     *selfsigned.Keeper
	publisher *selfsigned.Publisher
	listener  net.Listener
	webhook   *webhook.Handler
	// clusterScan is nil unless scan.interval is set.
	clusterScan *scan.Periodic
	// exemptions are the upgrade verdict's: the file's and the ConfigMap's.
	exemptions *exemptionSource
	state      atomic.Int32
	readyMu    sync.Mutex
	lastReady  ops.Readiness
	// checks are the components readiness asks, built with them.
	checks   []ops.Check
	starting func()
	draining func()
}

// New opens the store and binds the listener, so that Addr is known and a
// port conflict or a locked data directory fails here, before Run.
func New(cfg config.Config, opts Options) (_ *App, err error) {
	if err := errors.Join(cfg.Validate(), cfg.ValidateListen()); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	a := &App{cfg: cfg, log: opts.Logger, starting: opts.Starting, draining: opts.Draining}
	cfg.WarnSecretsInFile(a.log)

	p, err := parts.Open(cfg, parts.Options{Logger: opts.Logger, Now: opts.Now, Registerer: reg})
	if err != nil {
		return nil, err
	}
	// Whatever fails below leaves the data directory unlocked.
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()
	a.parts, a.store = p, p.Store
	admissionLabels := admission.NewLabels(admission.LabelOptions{Classes: p.Classes, Webhooks: cfg.Admission.Webhooks,
		MaxResources: cfg.Admission.Metrics.MaxResources, MaxWebhooks: cfg.Admission.Metrics.MaxWebhooks,
		OnFirstFold: func(kind string) {
			opts.Logger.Warn().Str("component", "admission").Str("kind", kind).
				Msg("more admission webhook label values than admission.metrics allows; the rest are labelled \"other\" (the API has them all)")
		}})
	// One guard for every metric, so that they agree on which clusters
	// keep their names.
	labels := cardinality.New(cardinality.Options{MaxSeries: cfg.Metrics.MaxSeries, MaxClusters: cfg.Metrics.MaxClusters,
		Clusters: cfg.ClusterNames(), Catalog: p.Catalog, Registerer: reg, Logger: opts.Logger})
	a.agg = p.Aggregator(aggregate.Options{
		Labels:     labels,
		Logger:     opts.Logger,
		Registerer: reg,
		Admission:  aggregate.AdmissionOptions{Labels: admissionLabels, Resolver: admission.NewResolver(cfg.Admission.Webhooks)},
	})
	reg.MustRegister(exporter.New(exporter.Options{
		Querier: a.store, Window: cfg.Metrics.Window, Grace: cfg.Metrics.Grace, Refresh: cfg.Metrics.Refresh,
		IsSystem: p.System.IsSystem, ClusterVersions: cfg.ClusterVersions(), RemovalHorizon: cfg.Metrics.RemovalHorizon, Now: opts.Now,
		Labels: labels,
	}))
	reg.MustRegister(exporter.NewAdmission(exporter.AdmissionOptions{Querier: a.store, Labels: admissionLabels,
		Window: cfg.Metrics.Window, Grace: cfg.Metrics.Grace, Refresh: cfg.Metrics.Refresh, Now: opts.Now}))

	if err := a.buildInputs(reg, opts.Now); err != nil {
		return nil, err
	}
	a.checks = a.readinessChecks()
	if err := a.buildClusterScan(reg, opts.Now); err != nil {
		return nil, err
	}
	if err := a.buildExemptions(reg, opts.Now); err != nil {
		return nil, err
	}
	if a.access, err = access.New(context.Background(), cfg.Access()); err != nil {
		return nil, err
	}
	if a.srv, err = a.buildServer(reg, opts); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (set --listen to a free address): %w", cfg.Listen, err)
	}
	a.listener = ln
	return a, nil
}

// Addr is the address the server listens on, useful with port 0.
func (a *App) Addr() net.Addr { return a.listener.Addr() }

// TLS reports whether the server speaks HTTPS.
func (a *App) TLS() bool { return a.cfg.ServesTLS() }
