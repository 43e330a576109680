// Package testserver runs a Sunset server for tests: an app.App on a
// random loopback port with a data directory of the test's own, stopped
// when the test ends.
//
// It imports app, so app's own tests that use it are in package app_test.
// It is for tests only; production code must not import it.
package testserver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
)

// Config is app.DefaultConfig for a test: a fresh data directory from
// t.TempDir, 127.0.0.1:0, and a shutdown that gives up after 5 s.
func Config(t testing.TB) app.Config {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

// Logger passes the server's warnings and errors to the test log.
func Logger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
}

// Server is a running Sunset.
type Server struct {
	// URL is http://127.0.0.1:<port>, https:// when cfg has a serving
	// certificate.
	URL string
	App *app.App
	// Config is what the server runs with; another server started with it
	// opens the same data directory.
	Config app.Config
	// Registry holds the server's metrics, the ones /metrics serves.
	Registry *prometheus.Registry

	stop func()
}

// Start builds a server from cfg and opts and runs it until the test ends
// or Stop is called. A nil opts.Registry becomes a fresh registry of the
// server's own; the zero opts.Logger logs nothing.
func Start(t testing.TB, cfg app.Config, opts app.Options) *Server {
	t.Helper()
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	a, err := app.New(cfg, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	scheme := "http"
	if cfg.TLSCertFile != "" {
		scheme = "https"
	}
	var once sync.Once
	s := &Server{URL: scheme + "://" + a.Addr().String(), App: a, Config: cfg, Registry: opts.Registry,
		stop: func() {
			once.Do(func() {
				cancel()
				require.NoError(t, <-done, "the server's Run")
			})
		}}
	t.Cleanup(s.Stop)
	return s
}

// Stop shuts the server down and requires that Run returned no error.
// Only the first call does anything.
func (s *Server) Stop() { s.stop() }
