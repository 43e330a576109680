package ops

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func TestEndpointsAnswerGetAndHeadOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "ops_test_total", Help: "A counter."}))
	ready := Readiness{Reason: "starting"}
	mux := http.NewServeMux()
	Register(mux, Options{Registry: reg, Ready: func() Readiness { return ready }})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	do := func(method, path string) (int, string, http.Header) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b), resp.Header
	}
	for _, path := range []string{"/-/healthy", "/livez", "/healthz"} {
		code, body, _ := do(http.MethodGet, path)
		require.Equal(t, http.StatusOK, code, path)
		require.Equal(t, "Sunset is healthy.\n", body, path)
	}
	for _, path := range []string{"/-/ready", "/readyz"} {
		code, body, _ := do(http.MethodGet, path)
		require.Equal(t, http.StatusServiceUnavailable, code, path)
		require.Equal(t, "Sunset is not ready: starting\n", body, path)
	}
	ready = Readiness{OK: true}
	for _, path := range []string{"/-/ready", "/readyz"} {
		code, body, _ := do(http.MethodGet, path)
		require.Equal(t, http.StatusOK, code, path)
		require.Equal(t, "Sunset is ready.\n", body, path)
		code, body, _ = do(http.MethodHead, path)
		require.Equal(t, http.StatusOK, code, path)
		require.Empty(t, body, path)
	}
	code, body, _ := do(http.MethodGet, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, strings.Split(body, "\n"), "ops_test_total 0")

	for _, path := range []string{"/-/healthy", "/livez", "/healthz", "/-/ready", "/readyz", "/metrics"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			code, _, h := do(method, path)
			require.Equal(t, http.StatusMethodNotAllowed, code, "%s %s", method, path)
			require.Equal(t, "GET, HEAD", h.Get("Allow"), "%s %s", method, path)
		}
	}
}

// Unauthenticated callers learn only the reason code of a not-ready
// server; the detail, which can name the data directory, its free space
// or a broker's error text, goes only to callers Verbose allows, and only
// with ?verbose.
func TestReadinessDetailOnlyForVerboseAllowedCallers(t *testing.T) {
	detail := "only 12.0 MiB free on the filesystem of /var/lib/sunset, below the 64.0 MiB reserve"
	mux := http.NewServeMux()
	Register(mux, Options{
		Registry: prometheus.NewRegistry(),
		Ready:    func() Readiness { return Readiness{Reason: "disk", Detail: detail} },
		Verbose:  func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer reader" },
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path, token, want string
	}{
		{"/-/ready", "", "Sunset is not ready: disk\n"},
		{"/-/ready?verbose", "", "Sunset is not ready: disk\n"},
		{"/readyz?verbose", "someone", "Sunset is not ready: disk\n"},
		{"/-/ready", "reader", "Sunset is not ready: disk\n"},
		{"/-/ready?verbose", "reader", "Sunset is not ready: disk: " + detail + "\n"},
		{"/readyz?verbose=1", "reader", "Sunset is not ready: disk: " + detail + "\n"},
	} {
		code, body := get(tc.path, tc.token)
		require.Equal(t, http.StatusServiceUnavailable, code, "%+v", tc)
		require.Equal(t, tc.want, body, "%+v", tc)
	}
}

// The first check that is not ready names the reason, with its own
// detail as it gave it; the checks after it are not asked.
func TestEvaluateTakesTheFirstCheckNotReady(t *testing.T) {
	var asked []string
	check := func(name string, ok bool, detail string) Check {
		return Check{Name: name, Ready: func() (bool, string) { asked = append(asked, name); return ok, detail }}
	}
	require.Equal(t, Readiness{OK: true}, Evaluate([]Check{check("disk", true, ""), check("kafka", true, "")}))
	require.Equal(t, []string{"disk", "kafka"}, asked)

	asked = nil
	got := Evaluate([]Check{check("disk", true, ""), check("kafka", false, "joining the group"), check("fleet", false, "not connected yet")})
	require.Equal(t, Readiness{Reason: "kafka", Detail: "joining the group"}, got)
	require.Equal(t, []string{"disk", "kafka"}, asked)

	require.Equal(t, Readiness{OK: true}, Evaluate(nil))
}
