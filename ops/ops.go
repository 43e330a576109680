// Package ops serves the endpoints that operators and Kubernetes probe:
// liveness, readiness and the Prometheus metrics. They answer GET and HEAD
// only; any other method gets 405 with an Allow header.
package ops

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Readiness is whether the server accepts and commits events. When it does
// not, Reason is a short code that is safe to tell anyone (starting,
// stopping, disk, kafka, fleet) and Detail says what is wrong, which can
// name paths, sizes and brokers' error text: it is for the log and for
// callers that Verbose lets see it.
type Readiness struct {
	OK     bool
	Reason string
	Detail string
	// Warnings are what a ready server cannot see, shown like a detail:
	// they do not make it unready.
	Warnings []string
}

// Check is one component's part in readiness, as metrics-server's named
// healthz checks are: Name is the reason code a not-ready answer gives
// (disk, kafka, fleet), and Ready says whether the component accepts and
// commits events and, when it does not, the detail. The component
// reports its reason typed, so nothing reads it back out of error text.
type Check struct {
	Name  string
	Ready func() (ok bool, detail string)
}

// Evaluate is the readiness of checks, in their order: the first that is
// not ready gives the reason and its detail.
func Evaluate(checks []Check) Readiness {
	for _, c := range checks {
		if ok, detail := c.Ready(); !ok {
			return Readiness{Reason: c.Name, Detail: detail}
		}
	}
	return Readiness{OK: true}
}

// Options are what the endpoints report on.
type Options struct {
	// Registry is served on /metrics, and counts the handler's own errors.
	Registry *prometheus.Registry
	// Ready reports whether the server accepts and commits events.
	Ready func() Readiness
	// Verbose reports whether the caller of /-/ready?verbose may see the
	// detail of a not-ready answer; nil lets no one.
	Verbose func(*http.Request) bool
}

// Register adds the endpoints to mux: /-/healthy and its Kubernetes names
// /livez and /healthz, /-/ready and /readyz, and /metrics. /healthz is
// liveness, as kube components answered it before /livez: probes written
// for them restart a process on it, and a server that is only not ready
// must not be restarted.
//
// Readiness is probed without credentials, so its answer says only that
// the server is not ready and the reason code: "Sunset is not ready: disk".
// With ?verbose, a caller that Verbose allows also gets the detail, "Sunset
// is not ready: disk: only 12.0 MiB free on ...".
func Register(mux *http.ServeMux, o Options) {
	healthy := func(w http.ResponseWriter, _ *http.Request) { write(w, http.StatusOK, "Sunset is healthy.\n") }
	ready := func(w http.ResponseWriter, r *http.Request) {
		rd := o.Ready()
		_, verbose := r.URL.Query()["verbose"]
		verbose = verbose && o.Verbose != nil && o.Verbose(r)
		var warnings strings.Builder
		if verbose {
			for _, w := range rd.Warnings {
				warnings.WriteString("warning: " + w + "\n")
			}
		}
		if rd.OK {
			write(w, http.StatusOK, "Sunset is ready.\n"+warnings.String())
			return
		}
		text := "Sunset is not ready: " + rd.Reason
		if verbose && rd.Detail != "" {
			text += ": " + rd.Detail
		}
		write(w, http.StatusServiceUnavailable, text+"\n"+warnings.String())
	}
	// A GET pattern also matches HEAD; the mux answers other methods with
	// 405 and Allow.
	for _, path := range []string{"/-/healthy", "/livez", "/healthz"} {
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
