// Package ops serves the endpoints that operators and Kubernetes probe:
// liveness, readiness and the Prometheus metrics. They answer GET and HEAD
// only; any other method gets 405 with an Allow header.
package ops

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options are what the endpoints report on.
type Options struct {
	// Registry is served on /metrics, and counts the handler's own errors.
	Registry *prometheus.Registry
	// Ready reports whether the server accepts and commits events, and if
	// not, why.
	Ready func() (ok bool, why string)
}

// Register adds the endpoints to mux: /-/healthy and its Kubernetes name
// /livez, /-/ready and /readyz, and /metrics.
func Register(mux *http.ServeMux, o Options) {
	healthy := func(w http.ResponseWriter, _ *http.Request) { write(w, http.StatusOK, "Sunset is healthy.\n") }
	ready := func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := o.Ready(); !ok {
			write(w, http.StatusServiceUnavailable, "Sunset is not ready: "+why+"\n")
			return
		}
		write(w, http.StatusOK, "Sunset is ready.\n")
	}
	// A GET pattern also matches HEAD; the mux answers other methods with
	// 405 and Allow.
	for _, path := range []string{"/-/healthy", "/livez"} {
		mux.HandleFunc("GET "+path, healthy)
	}
	for _, path := range []string{"/-/ready", "/readyz"} {
		mux.HandleFunc("GET "+path, ready)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{Registry: o.Registry}))
}

func write(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(text))
}
