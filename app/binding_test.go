package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

// postAs posts one deprecated event with a bearer token (none when empty)
// and returns the code and the body.
func (s *server) postAs(path, token, id string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(eventList(ev(id))))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return s.do(req)
}

// requireOrigin checks a 200 answer and the cluster and node it counted as.
func requireOrigin(t *testing.T, code int, body []byte, cluster, node string) {
	t.Helper()
	require.Equal(t, http.StatusOK, code, string(body))
	var r struct{ Cluster, Node string }
	require.NoError(t, json.Unmarshal(body, &r))
	require.Equal(t, [2]string{cluster, node}, [2]string{r.Cluster, r.Node})
}

func tlsClient(serverPEM []byte, certs ...tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(serverPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
}

// Tokens of webhook-token-auth-file (kube-apiserver's --token-auth-file
// format) are each bound to one apiserver: a token posts as its own cluster
// and node, from the path or without one, and gets 403 for any other. The
// shared token of webhook-token-file stays unbound.
func TestWebhookTokensAreBoundToTheirApiserver(t *testing.T) {
	cfg := testConfig(t)
	var serverPEM []byte
	cfg.TLSCertFile, cfg.TLSKeyFile, serverPEM = selfSigned(t)
	dir := t.TempDir()
	cfg.WebhookTokenAuthFile = filepath.Join(dir, "tokens.csv")
	require.NoError(t, os.WriteFile(cfg.WebhookTokenAuthFile, []byte(
		"tok-m0,prod/master-0,uid-0,\"system:masters,sunset\"\n"+
			"tok-m1,prod/master-1,uid-1\n"+
			"\n"+
			"tok-m2,master-2,uid-2\n"), 0o600))
	cfg.WebhookTokenFile = filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(cfg.WebhookTokenFile, []byte("shared-token\n"), 0o600))
	s := start(t, cfg)
	s.client = tlsClient(serverPEM)

	// kube-apiserver's own webhook client, with master-0's token.
	user := "\n    token: tok-m0"
	sendThroughWebhook(t, realWebhookWithUser(t, s.url+"/audit/webhook/prod/master-0", user, serverPEM), "bound", time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC),
		[]traffic{{n: 4, user: "alice", agent: "kubectl/v1.32.4", verb: "get", ref: &auditinternal.ObjectReference{Resource: "endpoints", APIVersion: "v1"}, deprecated: true}})
	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(4), ep.Status.RequestCount)
	require.Equal(t, "master-0", ep.Status.CurrentHour.ByNode[0].NodeName)
	require.Equal(t, "prod", ep.Status.CurrentHour.ByNode[0].Cluster)

	forbidden := func(bound, as string) string {
		return statusBody(403, "Forbidden", "this token belongs to apiserver "+bound+" and may not post as "+as+
			"; fix the URL path in its webhook kubeconfig (/audit/webhook/"+bound+")")
	}
	code, body := s.postAs("/audit/webhook/prod/master-1", "tok-m0", "x1")
	require.Equal(t, 403, code)
	require.JSONEq(t, forbidden("prod/master-0", "prod/master-1"), string(body))
	code, body = s.postAs("/audit/webhook/master-0", "tok-m0", "x2")
	require.Equal(t, 403, code, "a path without a cluster is default-cluster's")
	require.JSONEq(t, forbidden("prod/master-0", "default/master-0"), string(body))
	code, body = s.postAs("/audit/webhook/default/master-2", "tok-m1", "x3")
	require.Equal(t, 403, code)
	require.JSONEq(t, forbidden("prod/master-1", "default/master-2"), string(body))

	// Without a node in the path the token names the apiserver.
	code, body = s.postAs("/audit/webhook", "tok-m0", "ok1")
	requireOrigin(t, code, body, "prod", "master-0")
	code, body = s.postAs("/audit/webhook/master-2", "tok-m2", "ok2")
	requireOrigin(t, code, body, "default", "master-2")
	code, body = s.postAs("/audit/webhook/default/master-2", "tok-m2", "ok3")
	requireOrigin(t, code, body, "default", "master-2")
	// The shared token posts as anyone, as before.
	code, body = s.postAs("/audit/webhook/staging/anything", "shared-token", "ok4")
	requireOrigin(t, code, body, "staging", "anything")

	for _, token := range []string{"", "tok-m9", "prod/master-0"} {
		code, body = s.postAs("/audit/webhook/prod/master-0", token, "no")
		require.Equal(t, 401, code, token)
		require.JSONEq(t, statusBody(401, "Unauthorized", "a valid bearer token is required (set token in the webhook kubeconfig to this apiserver's token in webhook-token-auth-file, or to the contents of webhook-token-file)"), string(body))
	}
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_webhook_forbidden_total Audit webhook batches answered 403: valid credentials of one apiserver posting as another.
# TYPE sunset_webhook_forbidden_total counter
sunset_webhook_forbidden_total 3
`), "sunset_webhook_forbidden_total"))
	require.Equal(t, int64(4+4), getAPI(t, s, "endpoints.v1").Status.RequestCount, "nothing refused was counted")
}

// A client certificate names its node in its common name or a subject
// alternative name; a path naming another node is refused. With a bound
// token too, both must name the same apiserver.
func TestWebhookClientCertificateNamesItsNode(t *testing.T) {
	cfg := testConfig(t)
	var serverPEM []byte
	cfg.TLSCertFile, cfg.TLSKeyFile, serverPEM = selfSigned(t)
	// The profile of an apiserver's certificate: O=<cluster>, CN=<node>.
	ca := testpki.NewCA(t, "apiserver-client-ca")
	prod := ca.Apiserver(t, "prod", "master-7", "master-7.example", "10.0.0.7")
	dir := t.TempDir()
	cfg.TLSClientCAFile = filepath.Join(dir, "client-ca.crt")
	require.NoError(t, os.WriteFile(cfg.TLSClientCAFile, ca.PEM, 0o600))
	// Paths without a cluster post to the default cluster, which an O=prod
	// certificate may post to only when it is prod.
	cfg.DefaultCluster = "prod"
	s := start(t, cfg)
	pair := prod.TLS(t)
	s.client = tlsClient(serverPEM, pair)

	for path, node := range map[string]string{
		"/audit/webhook":                  "master-7",
		"/audit/webhook/prod/master-7":    "master-7",
		"/audit/webhook/master-7.example": "master-7.example",
		"/audit/webhook/10.0.0.7":         "10.0.0.7",
	} {
		code, body := s.postAs(path, "", "c-"+node+path)
		requireOrigin(t, code, body, "prod", node)
	}
	code, body := s.postAs("/audit/webhook/master-8", "", "c-8")
	require.Equal(t, 403, code)
	require.JSONEq(t, statusBody(403, "Forbidden", `the client certificate (CN "master-7") does not name node "master-8" in its common name or subject alternative names; fix the URL path or issue the apiserver a certificate for its node`), string(body))

	// A bound token and the certificate must agree.
	s.stop()
	cfg.WebhookTokenAuthFile = filepath.Join(dir, "tokens.csv")
	require.NoError(t, os.WriteFile(cfg.WebhookTokenAuthFile, []byte("tok-7,prod/master-7,uid-7\ntok-8,prod/master-8,uid-8\n"), 0o600))
	s = start(t, cfg)
	s.client = tlsClient(serverPEM, pair)
	code, body = s.postAs("/audit/webhook", "tok-7", "t-7")
	requireOrigin(t, code, body, "prod", "master-7")
	code, body = s.postAs("/audit/webhook", "tok-8", "t-8")
	require.Equal(t, 403, code, "the token names master-8, the certificate master-7")
	require.JSONEq(t, statusBody(403, "Forbidden", `the client certificate (CN "master-7") does not name node "master-8" in its common name or subject alternative names; fix the URL path or issue the apiserver a certificate for its node`), string(body))
}

// Without credentials, the webhook may listen beyond loopback only when
// asked to, and Sunset then says so at startup.
func TestUnauthenticatedWebhookBeyondLoopbackMustBeAskedFor(t *testing.T) {
	cfg := testConfig(t)
	cfg.Listen = "0.0.0.0:0"
	_, err := app.New(cfg, app.Options{})
	require.EqualError(t, err, "listen: 0.0.0.0:0 is not a loopback address and the webhook has no credentials, so anyone who reaches it could add counts: "+
		"set webhook-token-auth-file (a token per apiserver), webhook-token-file or tls-client-ca-file, or set webhook-allow-unauthenticated=true to accept that\n"+
		"listen: 0.0.0.0:0 is reachable from other machines, but nothing authenticates API readers: set authentication-kubeconfig and authorization-kubeconfig (in a pod the in-cluster config is used), token-auth-file or client-ca-file, or set allow-unauthenticated=true to let anyone who reaches the port read and reset")

	warning := "the webhook accepts batches without credentials on a non-loopback address (webhook-allow-unauthenticated): anyone who reaches it can add counts"
	logs := func(cfg config.Config) string {
		var buf bytes.Buffer
		// Badger logs from its own goroutines.
		a, err := app.New(cfg, app.Options{Logger: zerolog.New(zerolog.SyncWriter(&buf)), Registry: prometheus.NewRegistry()})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, a.Run(ctx))
		return buf.String()
	}
	cfg.WebhookAllowUnauthenticated, cfg.AllowUnauthenticated = true, true
	out := logs(cfg)
	require.Contains(t, out, `"level":"warn","listen":"0.0.0.0:0","message":"`+warning+`"`)
	require.Contains(t, out, `"level":"warn","listen":"0.0.0.0:0","message":"allow-unauthenticated is set: anyone who reaches this address can read usernames, workloads and source addresses, and reset counts"`)

	// Loopback needs neither credentials nor the setting.
	cfg = testConfig(t)
	cfg.Listen = "localhost:0"
	require.NotContains(t, logs(cfg), warning)
	for listen, loopback := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:80": true, "localhost:8080": true, "[::1]:8080": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:8080": false, "sunset.example:8080": false, "8080": false,
	} {
		require.Equal(t, loopback, config.LoopbackListen(listen), listen)
	}
}

// kube-apiserver's own webhook client with a certificate of the dev
// cluster's master-0 cannot post as prod's master-0, the same node name in
// another cluster; prod's own certificate can.
func TestWebhookClientCertificateIsBoundToItsCluster(t *testing.T) {
	cfg := testConfig(t)
	var serverPEM []byte
	cfg.TLSCertFile, cfg.TLSKeyFile, serverPEM = selfSigned(t)
	ca := testpki.NewCA(t, "apiserver-client-ca")
	cfg.TLSClientCAFile = testpki.WriteFile(t, t.TempDir(), "client-ca.crt", ca.PEM)
	reg := prometheus.NewRegistry()
	s := startWith(t, cfg, func(o *app.Options) { o.Registry = reg })
	s.client = tlsClient(serverPEM)

	user := func(p testpki.Pair) string {
		return "\n    client-certificate-data: " + base64.StdEncoding.EncodeToString(p.CertPEM) +
			"\n    client-key-data: " + base64.StdEncoding.EncodeToString(p.KeyPEM)
	}
	at := time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)
	ref := &auditinternal.ObjectReference{Resource: "endpoints", APIVersion: "v1"}
	url := s.url + "/audit/webhook/prod/master-0"
	sendThroughWebhook(t, realWebhookWithUser(t, url, user(ca.Apiserver(t, "dev", "master-0")), serverPEM), "dev", at,
		[]traffic{{n: 3, user: "mallory", agent: "kubectl/v1.32.4", verb: "get", ref: ref, deprecated: true}})
	sendThroughWebhook(t, realWebhookWithUser(t, url, user(ca.Apiserver(t, "prod", "master-0")), serverPEM), "prod", at,
		[]traffic{{n: 4, user: "alice", agent: "kubectl/v1.32.4", verb: "get", ref: ref, deprecated: true}})

	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(4), ep.Status.RequestCount, "prod's four, none of dev's three")
	require.Len(t, ep.Status.CurrentHour.ByNode, 1)
	require.Equal(t, [2]string{"prod", "master-0"}, [2]string{ep.Status.CurrentHour.ByNode[0].Cluster, ep.Status.CurrentHour.ByNode[0].NodeName})
	require.Equal(t, "alice", ep.Status.CurrentHour.ByNode[0].ByUser[0].UserName)
	// Each of dev's batches (the client may split its six events in
	// two) is refused at each of the client's five attempts.
	forbidden := metricValue(t, reg, "sunset_webhook_forbidden_total", nil)
	require.Contains(t, []float64{5, 10}, forbidden)
}

// The hint for a data directory a server holds names that server's own
// address, from the config given with --config.
func TestLocalURLIsWhereThisHostReachesTheServer(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:8080":  "http://127.0.0.1:8080",
		"localhost:9090":  "http://localhost:9090",
		"[::1]:8080":      "http://[::1]:8080",
		":8443":           "https://localhost:8443",
		"0.0.0.0:8443":    "https://localhost:8443",
		"[::]:8443":       "https://localhost:8443",
		"10.0.0.1:8443":   "https://10.0.0.1:8443",
		"sunset.svc:8443": "https://sunset.svc:8443",
		"not-a-host-port": "",
	} {
		require.Equal(t, want, config.Config{Listen: listen}.LocalURL(), listen)
	}
	require.Equal(t, "https://127.0.0.1:8080", config.Config{Listen: "127.0.0.1:8080", TLSCertFile: "tls.crt"}.LocalURL())
}
