package app_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

func TestTLSServesHTTP2AndHTTP1(t *testing.T) {
	cfg := testConfig(t)
	var certPEM []byte
	cfg.TLSCertFile, cfg.TLSKeyFile, certPEM = selfSigned(t)
	s := start(t, cfg)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)

	for _, tc := range []struct {
		name  string
		h2    bool
		proto string
	}{{"http2", true, "HTTP/2.0"}, {"http1", false, "HTTP/1.1"}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: tc.h2}
			if !tc.h2 {
				tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			}
			resp, err := (&http.Client{Transport: tr}).Post(s.url+"/audit/webhook/n-"+tc.name, "application/json",
				strings.NewReader(string(eventList(ev("tls-"+tc.name)))))
			require.NoError(t, err)
			resp.Body.Close()
			tr.CloseIdleConnections()
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, tc.proto, resp.Proto)
		})
	}

	// The real webhook client, over HTTPS with the CA from its kubeconfig,
	// as kube-apiserver runs it.
	at := time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)
	ref := &auditinternal.ObjectReference{Resource: "endpoints", APIVersion: "v1"}
	sendThroughWebhook(t, realWebhook(t, s.url+"/audit/webhook/n-apiserver", certPEM), "tls", at,
		[]traffic{{n: 7, user: "alice", agent: "kubectl/v1.32.4", verb: "get", ref: ref, deprecated: true}})

	s.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(9), ep.Status.RequestCount)
	var nodes []string
	for _, n := range ep.Status.CurrentHour.ByNode {
		nodes = append(nodes, n.NodeName)
	}
	require.Equal(t, []string{"n-apiserver", "n-http1", "n-http2"}, nodes)
}

func TestHealthReadyAndMetrics(t *testing.T) {
	s := start(t, testConfig(t))
	for _, path := range []string{"/-/healthy", "/-/ready"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, err := http.NewRequest(method, s.url+path, nil)
			require.NoError(t, err)
			code, _ := s.do(req)
			require.Equal(t, 200, code, method+" "+path)
		}
	}
	code, _ := s.post("/audit/webhook/n1", "application/json", eventList(ev("m1"), ev("m2")))
	require.Equal(t, 200, code)
	code, _ = s.post("/audit/webhook/n1", "text/plain", nil)
	require.Equal(t, 415, code)

	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_build_info Always 1; labels describe the running binary.
# TYPE sunset_build_info gauge
sunset_build_info{goversion="`+runtimeVersion()+`",revision="abc",version="test"} 1
# HELP sunset_ready 1 while Sunset accepts and commits audit events (/-/ready answers 200), 0 while starting, shutting down, short of disk space or out of its Kafka group.
# TYPE sunset_ready gauge
sunset_ready 1
# HELP sunset_webhook_requests_total Audit webhook batches answered, by HTTP status code.
# TYPE sunset_webhook_requests_total counter
sunset_webhook_requests_total{code="200"} 1
sunset_webhook_requests_total{code="400"} 0
sunset_webhook_requests_total{code="401"} 0
sunset_webhook_requests_total{code="403"} 0
sunset_webhook_requests_total{code="408"} 0
sunset_webhook_requests_total{code="413"} 0
sunset_webhook_requests_total{code="415"} 1
sunset_webhook_requests_total{code="429"} 0
sunset_webhook_requests_total{code="500"} 0
sunset_webhook_requests_total{code="503"} 0
`), "sunset_build_info", "sunset_ready", "sunset_webhook_requests_total"))
	require.Equal(t, 2, testutil.CollectAndCount(s.reg, "sunset_webhook_request_duration_seconds", "sunset_store_commit_duration_seconds"))

	code, body := s.get("/metrics")
	require.Equal(t, 200, code)
	require.Contains(t, string(body), "\nsunset_webhook_request_duration_seconds_count 2\n")
	require.Contains(t, string(body), "\nsunset_store_commit_duration_seconds_count 1\n")

	s.stop()
	_, err := http.Get(s.url + "/-/healthy")
	require.Error(t, err, "the listener is closed after shutdown")
}

func TestNewReportsAllConfigErrors(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = ""
	cfg.Listen = "8080"
	cfg.UserAgent = "long"
	cfg.TLSCertFile = "/nonexistent.crt"
	cfg.MaxBodyBytes = 10
	cfg.Retention = time.Hour
	cfg.LogFormat = "xml"
	_, err := app.New(cfg, app.Options{})
	require.EqualError(t, err, strings.Join([]string{
		"data-dir: must not be empty",
		`listen: "8080" is not host:port (for example :8080 or 127.0.0.1:8080)`,
		"tls-cert-file: tls-cert-file and tls-key-file must be set together",
		"tls-cert-file: cannot read /nonexistent.crt: no such file or directory",
		"user-agent: \"long\" is not one of short, full",
		"max-body-bytes: 10 is below the minimum of 1048576; kube-apiserver sends up to 400 events per batch",
		"retention: 1h0m0s is shorter than the 24h the API reports",
		`log-format: "xml" is not one of auto, json, console`,
		"metrics.window: 24h0m0s must be from 1h to the retention (1h0m0s)",
	}, "\n"))
}

func TestSecondServerOnTheSameDataDirFailsClearly(t *testing.T) {
	cfg := testConfig(t)
	start(t, cfg)
	_, err := app.New(cfg, app.Options{})
	require.ErrorContains(t, err, "is in use by another Sunset process")
}

// selfSigned writes a loopback serving certificate and its key, issued by
// a CA of their own, and returns their paths and the CA's PEM, which a
// client trusts.
func selfSigned(t *testing.T) (certFile, keyFile string, caPEM []byte) {
	t.Helper()
	ca := testpki.NewCA(t, "sunset-ca")
	pair := ca.Server(t, "127.0.0.1")
	dir := t.TempDir()
	return testpki.WriteFile(t, dir, "tls.crt", pair.CertPEM), testpki.WriteFile(t, dir, "tls.key", pair.KeyPEM), ca.PEM
}
