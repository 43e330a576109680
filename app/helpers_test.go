package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// testNow is the clock of the captured traffic, minutes after its last
// event.
var testNow = ingesttest.CapturedNow

// server is a running Sunset on a random loopback port
// (internal/testutil/testserver), with helpers for its HTTP API.
type server struct {
	t    *testing.T
	app  *app.App
	url  string
	reg  *prometheus.Registry
	stop func()
	cfg  config.Config
	// client talks to the server; tests of TLS replace it.
	client *http.Client
	ts     *testserver.Server
}

// await returns once cond holds or after within, checking it at each line
// the server logs (testserver.Server.Await).
func (s *server) await(within time.Duration, cond func() bool) { s.ts.Await(within, cond) }

// testConfig is testserver.Config with JSON logs.
func testConfig(t *testing.T) config.Config {
	cfg := testserver.Config(t)
	cfg.LogFormat = "json"
	return cfg
}

// start runs Sunset with cfg until the test ends or stop is called.
func start(t *testing.T, cfg config.Config) *server {
	t.Helper()
	return startWith(t, cfg, func(*app.Options) {})
}

// startLogging is start with the server's logger.
func startLogging(t *testing.T, cfg config.Config, logger zerolog.Logger) *server {
	t.Helper()
	return startWith(t, cfg, func(o *app.Options) { o.Logger = logger })
}

// startWith is start with options changed by opt.
func startWith(t *testing.T, cfg config.Config, opt func(*app.Options)) *server {
	t.Helper()
	opts := app.Options{
		Logger:   testserver.Logger(t),
		Registry: prometheus.NewRegistry(),
		Now:      func() time.Time { return testNow },
		Build:    app.BuildInfo{Version: "test", Revision: "abc"},
	}
	opt(&opts)
	ts := testserver.Start(t, cfg, opts)
	return &server{t: t, app: ts.App, url: ts.URL, reg: ts.Registry, stop: ts.Stop, cfg: ts.Config, client: http.DefaultClient, ts: ts}
}

// restart stops s and starts a new server on the same data directory.
func (s *server) restart() *server {
	s.stop()
	return start(s.t, s.cfg)
}

func (s *server) post(path, contentType string, body []byte) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(body))
	require.NoError(s.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return s.do(req)
}

func (s *server) get(path string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	require.NoError(s.t, err)
	return s.do(req)
}

func (s *server) do(req *http.Request) (int, []byte) {
	s.t.Helper()
	resp, err := s.client.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp.StatusCode, b
}

// postCaptured sends every captured body to path and returns how many
// requests were counted.
func (s *server) postCaptured(path string) int {
	s.t.Helper()
	counted := 0
	for _, f := range capturedBodies(s.t) {
		code, body := s.post(path, "application/json", f)
		require.Equal(s.t, http.StatusOK, code, string(body))
		var r struct{ Counted int }
		require.NoError(s.t, json.Unmarshal(body, &r))
		counted += r.Counted
	}
	return counted
}

// capturedBodies are the eight webhook bodies kube-apiserver v1.36.3 sent.
func capturedBodies(t *testing.T) [][]byte {
	t.Helper()
	bodies := ingesttest.CapturedBodies(t, "../testdata")
	require.Len(t, bodies, 8)
	return bodies
}

func runtimeVersion() string { return runtime.Version() }

// logLines is a log destination that passes lines to the test log and lets
// the test wait for a message: the server says what it did, no guessing at
// times.
type logLines struct {
	t       *testing.T
	mu      sync.Mutex
	seen    map[string]int
	changed chan struct{}
}

func newLogLines(t *testing.T) *logLines {
	return &logLines{t: t, seen: map[string]int{}, changed: make(chan struct{})}
}

func (l *logLines) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	var line struct{ Message string }
	_ = json.Unmarshal(p, &line)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[line.Message]++
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

// count is how often msg was logged.
func (l *logLines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[msg]
}

// wait returns once msg has been logged, failing after 30 s.
func (l *logLines) wait(msg string) {
	l.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		n, changed := l.seen[msg], l.changed
		l.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			l.t.Fatalf("%q was not logged within 30s", msg)
		}
	}
}

// call sends one request to s with the given Host header and bearer
// token, and returns the answer's code and body.
func call(t *testing.T, s *server, method, path, host, token string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
