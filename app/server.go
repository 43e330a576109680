package app

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/httpjson"
	"github.com/kube-sunset/sunset/ops"
	"github.com/kube-sunset/sunset/web"
)

// buildServer routes the webhook, the read API, the ops endpoints and the
// page, each behind its own credentials.
func (a *App) buildServer(reg *prometheus.Registry, opts Options) (*http.Server, error) {
	cfg := a.cfg
	hooks := http.NewServeMux()
	a.webhook.Register(hooks)
	mux := http.NewServeMux()
	api.New(api.Options{Querier: a.store, Logger: a.log, Now: opts.Now, Catalog: a.parts.Catalog, IsSystem: a.parts.System.IsSystem,
		Retention: cfg.Retention, Deleter: a.store, FieldRules: a.parts.Rules, Webhooks: a.parts.WebhookService(),
		ClusterScan: a.clusterScanResults(), Exemptions: a.exemptions, GateOverrides: a.store,
		Views: api.NewViews(cfg.QueryCacheBytes)}).Register(mux)
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
