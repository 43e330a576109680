package webhook

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

func TestParseTokens(t *testing.T) {
	tokens, err := ParseTokens(strings.NewReader(
		"tok-a,prod/master-0,uid-a,\"system:masters,other\"\n"+
			"tok-b, master-1 ,uid-b\n"+
			"\n"+
			"tok-c,prod/master-2,uid-c,\n"), "default")
	require.NoError(t, err)
	require.Equal(t, Tokens{
		"tok-a": {Cluster: "prod", Node: "master-0"},
		"tok-b": {Cluster: "default", Node: "master-1"},
		"tok-c": {Cluster: "prod", Node: "master-2"},
	}, tokens)

	// Every problem, by line, never quoting a token.
	_, err = ParseTokens(strings.NewReader(
		"secret-1,prod/master-0\n"+
			",prod/master-1,uid\n"+
			"secret-3,/master-3,uid\n"+
			"secret-4,prod/,uid\n"+
			"secret-5,a/b/c,uid\n"+
			"secret-6,prod/master-6,uid\n"+
			"secret-6,prod/master-7,uid\n"), "default")
	require.EqualError(t, err, strings.Join([]string{
		`line 1: 2 columns; want token,user,uid[,"groups"] as in kube-apiserver's --token-auth-file`,
		"line 2: the token is empty",
		"line 3: the user column must name the apiserver as <cluster>/<node> or <node>; the cluster is empty",
		"line 4: the user column must name the apiserver as <cluster>/<node> or <node>; the node is empty",
		"line 5: the node name in the user column must be at most 253 bytes, without spaces or further slashes",
		"line 7: the same token as line 6; each apiserver needs its own",
	}, "\n"))
	require.NotContains(t, err.Error(), "secret")

	_, err = ParseTokens(strings.NewReader("\n\n"), "default")
	require.EqualError(t, err, "holds no token")
	_, err = ParseTokens(strings.NewReader("secret,\"prod/master-0,uid\n"), "default")
	require.EqualError(t, err, `line 1: not valid CSV (extraneous or missing " in quoted-field)`)
}

// A client certificate is bound to its cluster and node, O=<cluster> and
// CN=<node>: a dev cluster's master-0 may not post as prod's master-0. A
// path without a cluster posts to the default cluster, which a certificate
// that names clusters must name too.
func TestClientCertificateIsBoundToClusterAndNode(t *testing.T) {
	c, reg, srv, ca, serving := clientCertServer(t)

	certs := map[string]testpki.Pair{
		"prod/master-0":    ca.Apiserver(t, "prod", "master-0", "master-0.prod.example"),
		"dev/master-0":     ca.Apiserver(t, "dev", "master-0"),
		"no cluster":       ca.Apiserver(t, "", "master-0"),
		"default/master-0": ca.Apiserver(t, "default", "master-0"),
		"groups, not prod": ca.Client(t, "master-0", "system:masters"),
	}
	post := func(cert, path, id string) (int, string) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serving.Pool(), Certificates: []tls.Certificate{certs[cert].TLS(t)}}}
		defer tr.CloseIdleConnections()
		return postEvent(t, &http.Client{Transport: tr}, srv.URL+path, id)
	}
	notIssued := func(cluster string) string {
		return `the client certificate (CN \"master-0\") is not issued for cluster \"` + cluster + `\": it needs O=` +
			cluster + ` and CN=master-0 (a path without a cluster posts to the default cluster); fix the URL path or issue the apiserver such a certificate`
	}
	for _, tc := range []struct {
		cert, path string
		code       int
		says       string
	}{
		{"prod/master-0", "/audit/webhook/prod/master-0", 200, "prod/master-0"},
		{"prod/master-0", "/audit/webhook/prod/master-0.prod.example", 200, "prod/master-0.prod.example"},
		{"dev/master-0", "/audit/webhook/dev/master-0", 200, "dev/master-0"},
		{"dev/master-0", "/audit/webhook/prod/master-0", 403, notIssued("prod")},
		{"no cluster", "/audit/webhook/prod/master-0", 403, `names no cluster (it has no O)`},
		{"groups, not prod", "/audit/webhook/prod/master-0", 403, notIssued("prod")},
		{"prod/master-0", "/audit/webhook/dev/master-0", 403, notIssued("dev")},
		{"prod/master-0", "/audit/webhook/prod/master-1", 403, `does not name node \"master-1\"`},
		// No cluster in the path: the default cluster. A certificate
		// without O is bound to its node alone; one with O must name the
		// default cluster, so that dev's cannot count for it.
		{"no cluster", "/audit/webhook/master-0", 200, "default/master-0"},
		{"default/master-0", "/audit/webhook", 200, "default/master-0"},
		{"dev/master-0", "/audit/webhook", 403, notIssued("default")},
		{"dev/master-0", "/audit/webhook/master-0", 403, notIssued("default")},
		{"groups, not prod", "/audit/webhook/master-0", 403, notIssued("default")},
		{"no cluster", "/audit/webhook/master-1", 403, `does not name node \"master-1\"`},
	} {
		code, body := post(tc.cert, tc.path, tc.cert+tc.path)
		require.Equal(t, tc.code, code, "%+v: %s", tc, body)
		if code == 200 {
			var r Response
			require.NoError(t, json.Unmarshal([]byte(body), &r))
			require.Equal(t, tc.says, r.Cluster+"/"+r.Node, "%+v", tc)
			continue
		}
		require.Contains(t, body, tc.says, "%+v", tc)
	}
	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(2), n, "only prod's own certificate counted for prod")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_webhook_forbidden_total Audit webhook batches answered 403: valid credentials of one apiserver posting as another.
# TYPE sunset_webhook_forbidden_total counter
sunset_webhook_forbidden_total 9
`), "sunset_webhook_forbidden_total"))
}

// A certificate issued without O is bound to a node, not a cluster: it is
// refused on every path that names a cluster, the default cluster's own
// name included, with a 403 Status that says which certificate to issue
// or which path to post to instead; without a cluster in the path it
// posts to the default cluster.
func TestClientCertificateWithoutOrganizationNeedsAPathWithoutCluster(t *testing.T) {
	c, reg, srv, ca, serving := clientCertServer(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serving.Pool(),
		Certificates: []tls.Certificate{ca.Apiserver(t, "", "master-0").TLS(t)}}}
	t.Cleanup(tr.CloseIdleConnections)
	post := func(path, id string) (int, string) {
		return postEvent(t, &http.Client{Transport: tr}, srv.URL+path, id)
	}
	for _, cluster := range []string{"prod", "default"} {
		code, body := post("/audit/webhook/"+cluster+"/master-0", "no-o-"+cluster)
		require.Equal(t, http.StatusForbidden, code, body)
		require.JSONEq(t, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"Forbidden","code":403,
			"message":"the client certificate (CN \"master-0\") names no cluster (it has no O), so it may not post to a path that names cluster \"`+cluster+`\": `+
			`issue the apiserver a certificate with O=`+cluster+` and CN=master-0, or post to /audit/webhook/master-0, which counts for the default cluster"}`, body)
	}
	code, body := post("/audit/webhook/master-0", "no-o-default")
	require.Equal(t, http.StatusOK, code, body)
	var r Response
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	require.Equal(t, "default/master-0", r.Cluster+"/"+r.Node)
	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Zero(t, n, "nothing counted for prod")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_webhook_forbidden_total Audit webhook batches answered 403: valid credentials of one apiserver posting as another.
# TYPE sunset_webhook_forbidden_total counter
sunset_webhook_forbidden_total 2
`), "sunset_webhook_forbidden_total"))
}

// clientCertServer is the handler over a real counter, served with TLS by
// a server certificate that serving issued, asking for a client
// certificate that ca issued, with "default" as the default cluster.
func clientCertServer(t *testing.T) (*ingesttest.Counter, *prometheus.Registry, *httptest.Server, *testpki.CA, *testpki.CA) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return hostileNow }, reg)
	mux := http.NewServeMux()
	New(Options{Ingester: c, Tallies: c, Logger: zerolog.Nop(), Registerer: reg, RequireClientCert: true, DefaultCluster: "default"}).Register(mux)
	ca, serving := testpki.NewCA(t, "apiserver-clients"), testpki.NewCA(t, "serving")
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving.Server(t, "127.0.0.1").TLS(t)},
		ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return c, reg, srv, ca, serving
}

// postEvent posts one deprecated event with auditID id to url and returns
// the answer's status code and body.
func postEvent(t *testing.T, client *http.Client, url, id string) (int, string) {
	t.Helper()
	resp, err := client.Post(url, "application/json",
		strings.NewReader(string(eventList(deprecatedItem(id, "", "2026-11-21T19:10:00.000001Z")))))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
