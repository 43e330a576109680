// Package app assembles a running Sunset server from its parts: store,
// aggregator, webhook, read API and ops endpoints, and owns their lifecycle.
//
// It does not parse flags or handle signals; cmd/sunset does, so tests can
// embed a whole server with New and Run.
package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/access"
	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/exporter"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/file"
	"github.com/kube-sunset/sunset/ingest/fleet"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/ingest/webhook"
	"github.com/kube-sunset/sunset/internal/httpjson"
	"github.com/kube-sunset/sunset/internal/selfsigned"
	"github.com/kube-sunset/sunset/ops"
	"github.com/kube-sunset/sunset/parts"
	"github.com/kube-sunset/sunset/runner"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/web"
)

// BuildInfo describes the binary, for sunset_build_info and `sunset version`.
type BuildInfo struct {
	Version  string
	Revision string
}

// NewBuildInfo describes the binary from the version and revision set at
// build time; without a revision, from the VCS stamp Go records.
func NewBuildInfo(version, revision string) BuildInfo {
	b := BuildInfo{Version: version, Revision: revision}
	if info, ok := debug.ReadBuildInfo(); ok && b.Revision == "" {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				b.Revision = s.Value
			}
		}
	}
	return b
}

// String is what `sunset version` prints.
func (b BuildInfo) String() string {
	return fmt.Sprintf("sunset %s (revision %s, %s)", b.Version, b.Revision, runtime.Version())
}

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
	starting   func()
	draining   func()
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

// buildInputs builds what feeds the aggregator: the webhook, the followed
// files, and the Kafka consumer or the fleet.
func (a *App) buildInputs(reg *prometheus.Registry, now func() time.Time) error {
	cfg, st := a.cfg, a.store
	var prefilter *auditjson.Prefilter
	if cfg.Decoder == config.DecoderPrefilter {
		prefilter = auditjson.NewPrefilter(a.agg.Interest())
	}
	// What the webhook and files count also goes to the fleet's topic
	// with kafka.forward.
	var local interface {
		webhook.Ingester
		sink.Ingester
	} = a.agg
	if cfg.Kafka.Fleet.Enabled() {
		var err error
		a.fleet, err = fleet.New(fleet.Options{Config: cfg.Kafka, DefaultCluster: cfg.DefaultCluster,
			Aggregator: a.agg, Store: st, Logger: a.log, Registerer: reg, Prefilter: prefilter})
		if err != nil {
			return err
		}
		a.kafka = a.fleet.Consumer()
		if fw := a.fleet.Forwarder(); fw != nil {
			local = fw
		}
	}
	for _, ff := range cfg.Ingest.Files {
		a.followers = append(a.followers, file.NewFollower(file.FollowOptions{
			Path: ff.Path, Node: ff.Node, Cluster: cmp.Or(ff.Cluster, cfg.DefaultCluster),
			Ingester: local, Cursors: st, Logger: a.log, Prefilter: prefilter,
		}))
	}
	if err := a.buildManaged(local, prefilter, reg, now); err != nil {
		return err
	}
	if cfg.Kafka.Enabled() && a.fleet == nil {
		var err error
		a.kafka, err = kafka.New(kafka.Options{Config: cfg.Kafka, DefaultCluster: cfg.DefaultCluster,
			Ingester: a.agg, Cursors: st, Logger: a.log, Registerer: reg, Prefilter: prefilter})
		if err != nil {
			return err
		}
	}

	token := ""
	if cfg.WebhookTokenFile != "" {
		raw, err := os.ReadFile(cfg.WebhookTokenFile)
		if err != nil {
			return fmt.Errorf("webhook-token-file: %w", err)
		}
		if token = strings.TrimSpace(string(raw)); token == "" {
			return fmt.Errorf("webhook-token-file %s is empty", cfg.WebhookTokenFile)
		}
	}
	var tokens webhook.Tokens
	if cfg.WebhookTokenAuthFile != "" {
		var err error
		if tokens, err = webhook.LoadTokenFile(cfg.WebhookTokenAuthFile, cfg.DefaultCluster); err != nil {
			return err
		}
	}
	if !cfg.WebhookAuthenticated() && !config.LoopbackListen(cfg.Listen) {
		// Validate let this through only because it was asked for.
		a.log.Warn().Str("listen", cfg.Listen).
			Msg("the webhook accepts batches without credentials on a non-loopback address (webhook-allow-unauthenticated): anyone who reaches it can add counts")
	}
	a.webhook = webhook.New(webhook.Options{
		Token:                    token,
		Tokens:                   tokens,
		RequireClientCert:        cfg.TLSClientCAFile != "",
		Ingester:                 local,
		Logger:                   a.log,
		Registerer:               reg,
		DefaultCluster:           cfg.DefaultCluster,
		MaxBodyBytes:             cfg.MaxBodyBytes,
		MaxInFlight:              cfg.MaxInFlightBatches,
		MaxInFlightPerCredential: cfg.MaxInFlightBatchesPerCredential,
		MinBodyBytesPerSecond:    cfg.MinBodyBytesPerSecond,
		KeepRequestObject:        a.agg.NeedsRequestObject,
		Prefilter:                prefilter,
	})
	return nil
}

// buildServer routes the webhook, the read API, the ops endpoints and the
// page, each behind its own credentials.
func (a *App) buildServer(reg *prometheus.Registry, opts Options) (*http.Server, error) {
	cfg := a.cfg
	hooks := http.NewServeMux()
	a.webhook.Register(hooks)
	mux := http.NewServeMux()
	api.New(api.Options{Querier: a.store, Logger: a.log, Now: opts.Now, Catalog: a.parts.Catalog, IsSystem: a.parts.System.IsSystem,
		Retention: cfg.Retention, Deleter: a.store, FieldRules: a.parts.Rules, Webhooks: a.parts.WebhookService(),
		ClusterScan: a.clusterScanResults(), Exemptions: a.exemptions, GateOverrides: a.store}).Register(mux)
	ops.Register(mux, ops.Options{Registry: reg, Ready: a.probeReadiness, Verbose: func(r *http.Request) bool {
		// Who may scrape /metrics may read why Sunset is not ready.
		return a.access.Permits(r, "get", "/metrics")
	}})
	mux.HandleFunc("GET /debug/kafka/poison", func(w http.ResponseWriter, _ *http.Request) {
		samples := []kafka.PoisonSample{}
		if a.kafka != nil {
			samples = a.kafka.Poison()
		}
		httpjson.Write(w, http.StatusOK, map[string]any{"poison": samples})
	})
	// The webhook keeps its own credentials; everything else is read
	// access, decided by package access.
	top := http.NewServeMux()
	var hookHandler http.Handler = hooks
	reads := a.access.Wrap(mux)
	if config.LoopbackListen(cfg.Listen) {
		// What answers without credentials on loopback answers only
		// requests addressed to loopback: a web page whose name was
		// rebound to 127.0.0.1 sends its own name as Host.
		if a.access.Open() {
			reads = loopbackHostOnly(reads)
		}
		if !cfg.WebhookAuthenticated() {
			hookHandler = loopbackHostOnly(hookHandler)
		}
	}
	top.Handle("/", reads)
	if cfg.Gate.Enabled {
		if err := a.mountGate(top, reg, opts.Now); err != nil {
			return nil, err
		}
	}
	// The page holds no data: it asks the API, with the reader's token
	// where reads need one, so it is served to anyone.
	page := web.New()
	top.Handle("/{$}", page)
	top.Handle("/assets/", page)

	f := promauto.With(reg)
	f.NewGauge(prometheus.GaugeOpts{
		Name:        "sunset_build_info",
		Help:        "Always 1; labels describe the running binary.",
		ConstLabels: prometheus.Labels{"version": opts.Build.Version, "revision": opts.Build.Revision, "goversion": runtime.Version()},
	}).Set(1)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sunset_ready",
		Help: "1 while Sunset accepts and commits audit events (/-/ready answers 200), 0 while starting, shutting down, short of disk space or out of its Kafka group.",
	}, func() float64 {
		if a.probeReadiness().OK {
			return 1
		}
		return 0
	})

	srv := &http.Server{
		Handler:           top,
		ReadHeaderTimeout: 10 * time.Second,
		// A full 64 MiB batch over a slow link still fits.
		ReadTimeout:  2 * time.Minute,
		WriteTimeout: 2 * time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     zerologStdLogger(a.log.With().Str("component", "http").Logger()),
	}
	if cfg.ServesTLS() {
		var hookCAs *x509.CertPool
		if cfg.TLSClientCAFile != "" {
			var err error
			if hookCAs, err = loadCertPool(cfg.TLSClientCAFile); err != nil {
				return nil, fmt.Errorf("tls-client-ca-file: %w", err)
			}
			// A certificate from a reader's CA must not pass as an
			// apiserver's: the webhook sees only chains to its own CA.
			hookHandler = onlyChainsTo(hookCAs, hookHandler)
		}
		if cfg.TLSCertFile == "" {
			var err error
			if a.certs, err = a.newCertKeeper(); err != nil {
				return nil, err
			}
			if cfg.PublishCASecret != "" {
				if a.publisher, err = a.caPublisher(); err != nil {
					return nil, err
				}
			}
			// Served from the keeper at each handshake, so that a renewal
			// needs no restart.
			srv.TLSConfig = clientCertTLS(tls.Certificate{}, hookCAs, a.access)
			srv.TLSConfig.Certificates, srv.TLSConfig.GetCertificate = nil, a.certs.GetCertificate
		} else {
			cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("tls-cert-file and tls-key-file: %w", err)
			}
			srv.TLSConfig = clientCertTLS(cert, hookCAs, a.access)
		}
	}
	top.Handle("/audit/webhook", hookHandler)
	top.Handle("/audit/webhook/", hookHandler)
	return srv, nil
}

// Addr is the address the server listens on, useful with port 0.
func (a *App) Addr() net.Addr { return a.listener.Addr() }

// TLS reports whether the server speaks HTTPS.
func (a *App) TLS() bool { return a.cfg.ServesTLS() }

// Reason codes of a not-ready answer: what an unauthenticated probe may
// learn. The detail goes to the log and to callers allowed to read.
const (
	notReadyStarting = "starting"
	notReadyStopping = "stopping"
	notReadyDisk     = "disk"
	notReadyKafka    = "kafka"
	notReadyFleet    = "fleet"
)

// readiness says whether Sunset accepts and commits events, and if not
// why: a reason code and its detail.
func (a *App) readiness() ops.Readiness {
	switch state(a.state.Load()) {
	case stateStarting:
		return ops.Readiness{Reason: notReadyStarting}
	case stateDraining:
		return ops.Readiness{Reason: notReadyStopping}
	}
	if err := a.store.CheckSpace(); err != nil {
		return ops.Readiness{Reason: notReadyDisk, Detail: strings.TrimPrefix(err.Error(), "store: ")}
	}
	switch {
	case a.fleet != nil:
		if ok, why := a.fleet.Ready(); !ok {
			if detail, found := strings.CutPrefix(why, "kafka: "); found {
				return ops.Readiness{Reason: notReadyKafka, Detail: detail}
			}
			return ops.Readiness{Reason: notReadyFleet, Detail: strings.TrimPrefix(why, "fleet: ")}
		}
	case a.kafka != nil:
		if ok, why := a.kafka.Ready(); !ok {
			return ops.Readiness{Reason: notReadyKafka, Detail: why}
		}
	}
	return ops.Readiness{OK: true}
}

// probeReadiness is readiness for /-/ready and the sunset_ready gauge: it
// logs each change of reason or detail once, so that the detail a probe
// no longer shows is in the log.
func (a *App) probeReadiness() ops.Readiness {
	r := a.readiness()
	a.readyMu.Lock()
	changed := r.OK != a.lastReady.OK || r.Reason != a.lastReady.Reason || r.Detail != a.lastReady.Detail
	a.lastReady = r
	a.readyMu.Unlock()
	r.Warnings = append(r.Warnings, a.managedWarnings()...)
	if a.kafka != nil {
		r.Warnings = append(r.Warnings, a.kafka.Warnings()...)
	}
	if a.exemptions != nil {
		if err := a.exemptions.Problem(); err != nil {
			r.Warnings = append(r.Warnings, err.Error())
		}
	}
	for _, c := range a.agg.ClustersWithoutReads() {
		r.Warnings = append(r.Warnings, fmt.Sprintf("cluster %s sent no get, list or watch in %s: its reads are not logged, so deprecated reads cannot be seen (see inputs/managed.md#reads)", c, config.ShortDuration(aggregate.ReadsWindow)))
	}
	// Starting and stopping are told by their own lines.
	switch {
	case changed && r.Detail != "":
		a.log.Warn().Str("reason", r.Reason).Str("detail", r.Detail).Msg("not ready")
	case changed && r.OK && state(a.state.Load()) == stateReady:
		a.log.Info().Msg("ready")
	}
	return r
}

// Run serves until ctx is done or a component fails, then stops every
// component in the reverse order of start (see package runner):
//
//  1. HTTP: not ready, new batches refused with 503 while the ones in
//     flight finish (they wait for their commits), then the server stops;
//  2. the followed files and the Kafka consumer (or fleet), so that their
//     last batch commits;
//  3. the aggregator, which commits what it accepted, and the store's
//     maintenance;
//  4. the cluster's client CA watch;
//  5. badger is closed.
//
// /-/ready answers 503 from the start until every part runs, and again
// from the first step of shutdown. Run returns the error of the component
// that failed, joined with any that stopping met.
func (a *App) Run(ctx context.Context) error {
	var g runner.Group
	g.Add("store", func(ctx context.Context) error {
		<-ctx.Done()
		if err := a.parts.Close(); err != nil {
			return fmt.Errorf("closing: %w", err)
		}
		return nil
	}, nil)
	g.Add("access", func(ctx context.Context) error { a.access.Run(ctx); return nil }, nil)
	g.Add("aggregator", func(ctx context.Context) error { a.agg.Run(ctx); return nil }, nil)
	g.Add("maintenance", func(ctx context.Context) error { a.store.Maintain(ctx, maintenanceInterval); return nil }, nil)
	for _, f := range a.followers {
		g.Add("follow", f.Run, nil)
	}
	for _, m := range a.managed {
		g.Add(m.kind, m.run, nil)
	}
	switch {
	case a.fleet != nil:
		// Runs the filter's consumer too.
		g.Add("fleet", a.fleet.Run, nil)
	case a.kafka != nil:
		g.Add("kafka", a.kafka.Run, nil)
	}
	if a.certs != nil {
		g.Add("certs", a.runCerts, nil)
	}
	if a.clusterScan != nil {
		g.Add("cluster scan", a.clusterScan.Run, nil)
	}
	if a.exemptions != nil && a.exemptions.cms != nil {
		g.Add("exemptions", a.runExemptions, nil)
	}
	g.Add("http", a.serve, a.drain)

	err := g.Run(ctx, func() {
		if a.starting != nil {
			a.starting()
		}
		a.state.Store(int32(stateReady))
		a.log.Info().Str("listen", a.Addr().String()).Bool("tls", a.TLS()).Str("data_dir", a.cfg.DataDir).
			Bool("open_to_anyone", a.access.Open()).Msg("sunset is serving")
		if a.access.Open() && !config.LoopbackListen(a.cfg.Listen) {
			a.log.Warn().Str("listen", a.cfg.Listen).Msg("allow-unauthenticated is set: anyone who reaches this address can read usernames, workloads and source addresses, and reset counts")
		}
	})
	a.log.Info().Msg("sunset stopped")
	return err
}

// serve serves HTTP until drain shuts the server down.
func (a *App) serve(context.Context) error {
	var err error
	if a.TLS() {
		err = a.srv.ServeTLS(a.listener, "", "")
	} else {
		err = a.srv.Serve(a.listener)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// drain turns the server not ready, refuses new batches, waits for those
// in flight up to the shutdown timeout and shuts the HTTP server down.
func (a *App) drain() {
	a.log.Info().Msg("shutting down: draining in-flight batches")
	a.state.Store(int32(stateDraining))
	a.webhook.Drain()
	if a.draining != nil {
		a.draining()
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	err := a.webhook.Wait(ctx)
	if err == nil {
		err = a.srv.Shutdown(ctx)
	}
	if err != nil {
		// Clients that keep connections open (an apiserver's HTTP/2
		// connection can) must not hold the process: no handler runs past
		// this point that has not already been answered or cut off.
		a.log.Warn().Err(err).Dur("shutdown_timeout", a.cfg.ShutdownTimeout).Msg("connections still open after the shutdown timeout; closing them")
		_ = a.srv.Close()
	}
}

// maintenanceInterval is how often the store runs value-log GC, and looks
// whether an hour has expired.
const maintenanceInterval = 10 * time.Minute
