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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/exporter"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/ingest/file"
	"github.com/kube-sunset/sunset/ingest/fleet"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/ingest/webhook"
	"github.com/kube-sunset/sunset/internal/httpjson"
	"github.com/kube-sunset/sunset/noise"
	"github.com/kube-sunset/sunset/store"
)

// BuildInfo describes the binary, for sunset_build_info and `sunset version`.
type BuildInfo struct {
	Version  string
	Revision string
}

// Options are what the caller provides beyond Config.
type Options struct {
	Logger zerolog.Logger
	// Registry receives every metric and is served on /metrics. Nil means a
	// fresh registry with the Go and process collectors.
	Registry *prometheus.Registry
	// Now is the clock; nil means time.Now.
	Now   func() time.Time
	Build BuildInfo
}

// App is a Sunset server, built and listening but not yet serving.
type App struct {
	cfg       Config
	followers []*file.Follower
	kafka     *kafka.Consumer
	fleet     *fleet.Fleet
	log       zerolog.Logger
	store     *store.Store
	agg       *aggregate.Aggregator
	srv       *http.Server
	listener  net.Listener
	ready     atomic.Bool
	readyG    prometheus.Gauge
}

// New opens the store and binds the listener, so that Addr is known and a
// port conflict or a locked data directory fails here, before Run.
func New(cfg Config, opts Options) (*App, error) {
	if err := cfg.Validate(); err != nil {
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
	a := &App{cfg: cfg, log: opts.Logger}

	st, err := store.Open(store.Options{
		Dir:       cfg.DataDir,
		Retention: cfg.Retention,
		Logger:    opts.Logger.With().Str("component", "badger").Logger(),
		Now:       opts.Now,
	})
	if err != nil {
		return nil, err
	}
	a.store = st
	cat, err := catalog.New(cfg.Catalog.Extra)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	system := noise.New(cfg.SystemUsers)
	rules, err := fieldrule.New(cfg.FieldRules)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	a.agg = aggregate.New(aggregate.Options{
		Retention:       cfg.Retention,
		Store:           st,
		Logger:          opts.Logger,
		Registerer:      reg,
		UserAgent:       aggregate.UserAgentMode(cfg.UserAgent),
		Now:             opts.Now,
		Catalog:         cat,
		ClusterVersions: cfg.ClusterVersions(),
		IsSystem:        system.IsSystem,
		FieldRules:      rules,
	})
	reg.MustRegister(exporter.New(exporter.Options{
		Querier: st, Window: cfg.Metrics.Window, Grace: cfg.Metrics.Grace, Refresh: cfg.Metrics.Refresh,
		IsSystem: system.IsSystem, ClusterVersions: cfg.ClusterVersions(), RemovalHorizon: cfg.Metrics.RemovalHorizon, Now: opts.Now,
	}))
	registerStoreMetrics(reg, st, cfg.DataDir)

	// What the webhook and files count also goes to the fleet's topic
	// with kafka.forward.
	var local interface {
		webhook.Ingester
		file.CursorIngester
	} = a.agg
	if cfg.Kafka.Fleet.Enabled() {
		a.fleet, err = fleet.New(fleet.Options{Config: cfg.Kafka, DefaultCluster: cfg.DefaultCluster,
			Aggregator: a.agg, Store: st, Logger: opts.Logger, Registerer: reg})
		if err != nil {
			_ = st.Close()
			return nil, err
		}
		a.kafka = a.fleet.Consumer()
		if fw := a.fleet.Forwarder(); fw != nil {
			local = fw
		}
	}

	for _, ff := range cfg.Ingest.Files {
		a.followers = append(a.followers, file.NewFollower(file.FollowOptions{
			Path: ff.Path, Node: ff.Node, Cluster: cmp.Or(ff.Cluster, cfg.DefaultCluster),
			Ingester: local, Cursors: st, Logger: opts.Logger,
		}))
	}

	if cfg.Kafka.Enabled() && a.fleet == nil {
		a.kafka, err = kafka.New(kafka.Options{Config: cfg.Kafka, DefaultCluster: cfg.DefaultCluster,
			Ingester: a.agg, Cursors: st, Logger: opts.Logger, Registerer: reg})
		if err != nil {
			_ = st.Close()
			return nil, err
		}
	}

	token := ""
	if cfg.WebhookTokenFile != "" {
		raw, err := os.ReadFile(cfg.WebhookTokenFile)
		if err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("webhook-token-file: %w", err)
		}
		if token = strings.TrimSpace(string(raw)); token == "" {
			_ = st.Close()
			return nil, fmt.Errorf("webhook-token-file %s is empty", cfg.WebhookTokenFile)
		}
	}

	mux := http.NewServeMux()
	webhook.New(webhook.Options{
		Token:             token,
		RequireClientCert: cfg.TLSClientCAFile != "",
		Ingester:          local,
		Logger:            opts.Logger,
		Registerer:        reg,
		DefaultCluster:    cfg.DefaultCluster,
		MaxBodyBytes:      cfg.MaxBodyBytes,
		MaxInFlight:       cfg.MaxInFlightBatches,
	}).Register(mux)
	api.New(api.Options{Querier: st, Logger: opts.Logger, Now: opts.Now, Catalog: cat, IsSystem: system.IsSystem, Retention: cfg.Retention, Deleter: st, FieldRules: rules}).Register(mux)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("Sunset is healthy.\n"))
	})
	mux.HandleFunc("/-/ready", a.serveReady)
	mux.HandleFunc("/debug/kafka/poison", func(w http.ResponseWriter, _ *http.Request) {
		samples := []kafka.PoisonSample{}
		if a.kafka != nil {
			samples = a.kafka.Poison()
		}
		httpjson.Write(w, http.StatusOK, map[string]any{"poison": samples})
	})

	f := promauto.With(reg)
	f.NewGauge(prometheus.GaugeOpts{
		Name:        "sunset_build_info",
		Help:        "Always 1; labels describe the running binary.",
		ConstLabels: prometheus.Labels{"version": opts.Build.Version, "revision": opts.Build.Revision, "goversion": runtime.Version()},
	}).Set(1)
	a.readyG = f.NewGauge(prometheus.GaugeOpts{
		Name: "sunset_ready",
		Help: "1 while Sunset accepts and commits audit events, 0 while starting or shutting down.",
	})

	a.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// A full 64 MiB batch over a slow link still fits.
		ReadTimeout:  2 * time.Minute,
		WriteTimeout: 2 * time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     zerologStdLogger(opts.Logger.With().Str("component", "http").Logger()),
	}
	if cfg.TLSClientCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSClientCAFile)
		if err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("tls-client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			_ = st.Close()
			return nil, fmt.Errorf("tls-client-ca-file %s holds no PEM certificate", cfg.TLSClientCAFile)
		}
		// Verified when given; the webhook demands one, while /metrics and
		// the read API stay reachable without.
		a.srv.TLSConfig = &tls.Config{ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("listening on %s (set --listen to a free address): %w", cfg.Listen, err)
	}
	a.listener = ln
	return a, nil
}

// Addr is the address the server listens on, useful with port 0.
func (a *App) Addr() net.Addr { return a.listener.Addr() }

// TLS reports whether the server speaks HTTPS.
func (a *App) TLS() bool { return a.cfg.TLSCertFile != "" }

func (a *App) serveReady(w http.ResponseWriter, _ *http.Request) {
	if !a.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("Sunset is not ready.\n"))
		return
	}
	ok, why := true, ""
	switch {
	case a.fleet != nil:
		ok, why = a.fleet.Ready()
	case a.kafka != nil:
		ok, why = a.kafka.Ready()
		why = "kafka: " + why
	}
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("Sunset is not ready: " + why + "\n"))
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("Sunset is ready.\n"))
}

func (a *App) setReady(ok bool) {
	a.ready.Store(ok)
	if ok {
		a.readyG.Set(1)
	} else {
		a.readyG.Set(0)
	}
}

// Run serves until ctx is done, then shuts down in order: not ready, stop
// HTTP (waiting for in-flight batches, which wait for their commits), let the
// aggregator commit what it accepted, close badger. It returns the first
// error that stopped it or that shutdown met.
func (a *App) Run(ctx context.Context) error {
	aggCtx, stopAgg := context.WithCancel(context.Background())
	aggDone := make(chan struct{})
	go func() {
		defer close(aggDone)
		a.agg.Run(aggCtx)
	}()

	// Followers and the Kafka consumer stop before the aggregator, so their
	// last batch commits.
	followCtx, stopFollowers := context.WithCancel(context.Background())
	followersDone := make(chan struct{})
	followErr := make(chan error, len(a.followers))
	go func() {
		defer close(followersDone)
		var wg sync.WaitGroup
		for _, f := range a.followers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f.Run(followCtx); err != nil && !errors.Is(err, context.Canceled) {
					followErr <- err
				}
			}()
		}
		switch {
		case a.fleet != nil:
			// Runs the filter's consumer too.
			wg.Go(func() {
				if err := a.fleet.Run(followCtx); err != nil {
					a.log.Warn().Err(err).Msg("closing the fleet's producer")
				}
			})
		case a.kafka != nil:
			wg.Go(func() { _ = a.kafka.Run(followCtx) })
		}
		wg.Wait()
	}()

	serveErr := make(chan error, 1)
	go func() {
		var err error
		if a.TLS() {
			err = a.srv.ServeTLS(a.listener, a.cfg.TLSCertFile, a.cfg.TLSKeyFile)
		} else {
			err = a.srv.Serve(a.listener)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		serveErr <- err
	}()
	a.setReady(true)
	a.log.Info().Str("listen", a.Addr().String()).Bool("tls", a.TLS()).Str("data_dir", a.cfg.DataDir).Msg("sunset is serving")

	var errs []error
	select {
	case <-ctx.Done():
		a.log.Info().Msg("shutting down: draining in-flight batches")
	case err := <-serveErr:
		if err != nil {
			errs = append(errs, fmt.Errorf("serving HTTP: %w", err))
		}
	case err := <-followErr:
		errs = append(errs, err)
	}
	a.setReady(false)
	// A fresh context: ctx is already done and would cut the drain short.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	if err := a.srv.Shutdown(shutdownCtx); err != nil {
		// Clients that keep connections open (an apiserver's HTTP/2
		// connection can) must not hold the process: no handler runs past
		// this point that has not already been answered or cut off.
		a.log.Warn().Err(err).Dur("shutdown_timeout", a.cfg.ShutdownTimeout).Msg("connections still open after the shutdown timeout; closing them")
		_ = a.srv.Close()
	}
	stopFollowers()
	<-followersDone
	stopAgg()
	<-aggDone
	if err := a.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing store: %w", err))
	}
	a.log.Info().Msg("sunset stopped")
	return errors.Join(errs...)
}
