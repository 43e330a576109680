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
	"github.com/kube-sunset/sunset/config"
)

// Config is config.Default for a test: a fresh data directory from
// t.TempDir, 127.0.0.1:0, and a shutdown that gives up after 5 s.
func Config(t testing.TB) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

// Logger passes the server's warnings and errors to the test log. It
// logs at debug level into that filter, so that every line the server
// logs, debug lines included, wakes Server.Await.
func Logger(t testing.TB) zerolog.Logger {
	return zerolog.New(&zerolog.FilteredLevelWriter{
		Writer: zerolog.LevelWriterAdapter{Writer: zerolog.NewTestWriter(t)},
		Level:  zerolog.WarnLevel,
	}).Level(zerolog.DebugLevel)
}

// Server is a Sunset server of a test.
type Server struct {
	t testing.TB
	// URL is http://127.0.0.1:<port>, https:// when cfg has a serving
	// certificate.
	URL string
	App *app.App
	// Config is what the server runs with; another server started with it
	// opens the same data directory.
	Config config.Config
	// Registry holds the server's metrics, the ones /metrics serves.
	Registry *prometheus.Registry

	stop     func()
	stopOnce sync.Once
	// logged receives a token at each line the server logs, without
	// waiting: one token wakes a waiter as well as many.
	logged chan struct{}
}

// wake notes that the server logged a line.
func (s *Server) wake(*zerolog.Event, zerolog.Level, string) {
	select {
	case s.logged <- struct{}{}:
	default:
	}
}

// Await returns once cond holds, or after within. It checks cond again
// after the server logs a line: the server logs one after each commit
// ("commit finished", at debug level), when it turns ready and when an
// input connects or fails, so a change a test waits for comes with a line.
// A burst of lines makes one check, not one each: checks are at least
// RecheckGap apart, so that a heavy check does not load the server it
// waits on. The caller asserts what it waited for, with the value it got.
func (s *Server) Await(within time.Duration, cond func() bool) {
	deadline := time.After(within)
	for !cond() {
		gap := time.After(RecheckGap)
		select {
		case <-s.logged:
		case <-deadline:
			return
		}
		select {
		case <-gap:
		case <-deadline:
			return
		}
	}
}

// RecheckGap is how long a wait lets a burst of log lines gather before it
// checks again.
const RecheckGap = 50 * time.Millisecond

// Start builds a server from cfg and opts and runs it until the test ends
// or Stop is called: New, then Run.
func Start(t testing.TB, cfg config.Config, opts app.Options) *Server {
	t.Helper()
	s := New(t, cfg, opts)
	s.Run()
	return s
}

// New builds a server from cfg and opts, listening but not yet running: its
// URL is known, so that hooks in opts (Starting, Draining) can reach the
// server once Run starts it. A server never run is closed when the test
// ends. A nil opts.Registry becomes a fresh registry of the server's own;
// the zero opts.Logger logs nothing.
func New(t testing.TB, cfg config.Config, opts app.Options) *Server {
	t.Helper()
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	s := &Server{t: t, Config: cfg, Registry: opts.Registry, logged: make(chan struct{}, 1)}
	opts.Logger = opts.Logger.Hook(zerolog.HookFunc(s.wake))
	a, err := app.New(cfg, opts)
	require.NoError(t, err)
	scheme := "http"
	if cfg.TLSCertFile != "" {
		scheme = "https"
	}
	s.URL, s.App = scheme+"://"+a.Addr().String(), a
	// Run with a context already done starts nothing and closes what New
	// opened: the listener and the store.
	s.stop = func() { require.NoError(t, a.Run(canceled()), "closing the server that never ran") }
	t.Cleanup(s.Stop)
	return s
}

// Run runs the server until the test ends or Stop is called. Call it once,
// before Stop.
func (s *Server) Run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.App.Run(ctx) }()
	s.stop = func() {
		cancel()
		require.NoError(s.t, <-done, "the server's Run")
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// Stop shuts the server down and requires that Run returned no error.
// Only the first call does anything.
func (s *Server) Stop() { s.stopOnce.Do(s.stop) }
