package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// probe is what the server answers on /-/ready and to a batch, and its
// sunset_ready gauge, at one moment.
type probe struct {
	ready, readyBody  string
	batch, retryAfter string
	gauge             float64
}

func probeServer(t *testing.T, url string, reg *prometheus.Registry, batchID string) probe {
	t.Helper()
	var p probe
	resp, err := http.Get(url + "/-/ready")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p.ready, p.readyBody = resp.Status, string(b)
	resp, err = http.Post(url+"/audit/webhook/n1", "application/json", strings.NewReader(string(eventList(ev(batchID)))))
	require.NoError(t, err)
	resp.Body.Close()
	p.batch, p.retryAfter = resp.Status, resp.Header.Get("Retry-After")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "sunset_ready" {
			p.gauge = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return p
}

// /-/ready answers 503 while the server starts and while it drains; the
// hooks run at those moments, so the test looks without waiting on time.
// Batches are taken while starting (they are committed), and refused with
// 503 and Retry-After while draining (the apiserver retries them).
func TestReadyIsFalseWhileStartingAndDraining(t *testing.T) {
	cfg := testConfig(t)
	reg := prometheus.NewRegistry()
	var url string
	var starting, draining probe
	logs := newLogLines(t)
	ts := testserver.New(t, cfg, app.Options{
		Logger:   zerolog.New(logs).Level(zerolog.InfoLevel),
		Registry: reg,
		Now:      func() time.Time { return testNow },
		Starting: func() { starting = probeServer(t, url, reg, "while-starting") },
		Draining: func() { draining = probeServer(t, url, reg, "while-draining") },
	})
	url = ts.URL
	ts.Run()

	// Run logs this once ready.
	logs.wait("sunset is serving")
	running := probeServer(t, url, reg, "while-running")
	ts.Stop()

	require.Equal(t, probe{ready: "503 Service Unavailable", readyBody: "Sunset is not ready: starting\n", batch: "200 OK"}, starting)
	require.Equal(t, probe{ready: "200 OK", readyBody: "Sunset is ready.\n", batch: "200 OK", gauge: 1}, running)
	require.Equal(t, probe{ready: "503 Service Unavailable", readyBody: "Sunset is not ready: stopping\n", batch: "503 Service Unavailable", retryAfter: "10"}, draining)

	s := start(t, cfg)
	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(2), ep.Status.RequestCount, "the batches taken while starting and running, not the one refused while draining")
}
