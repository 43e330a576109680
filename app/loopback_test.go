package app_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

const foreignHostMessage = "Sunset serves this address without authentication and so answers only requests whose Host is localhost, 127.0.0.1 or [::1]; " +
	"call it by one of those, or configure authentication to serve other names"

// Open on loopback, Sunset answers only requests addressed to loopback: a
// page in a browser on the host whose name was rebound to 127.0.0.1 sends
// its own name as Host, and may neither read, reset, scrape nor post.
func TestLoopbackOpenModeAnswersOnlyLoopbackHosts(t *testing.T) {
	s := start(t, testConfig(t))
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.url, "http://"))
	require.NoError(t, err)
	one := "/apis/sunset.dev/v1/apirequestcounts/endpoints.v1"
	code, body := call(t, s, http.MethodPost, "/audit/webhook/n1", "", "", eventList(ev("before")))
	require.Equal(t, 200, code, body)

	for _, host := range []string{"rebound.example", "rebound.example:" + port, "127.0.0.1.nip.io:" + port, "localhost.rebound.example",
		"10.0.0.1:" + port, "[::2]:" + port, "0.0.0.0:" + port} {
		for _, req := range []struct {
			method, path string
			body         []byte
		}{
			{http.MethodGet, one, nil}, {http.MethodDelete, one, nil}, {http.MethodGet, "/metrics", nil},
			{http.MethodGet, "/-/ready?verbose", nil}, {http.MethodPost, "/audit/webhook/n1", eventList(ev("rebound"))},
		} {
			code, body := call(t, s, req.method, req.path, host, "", req.body)
			require.Equal(t, 403, code, "%s %s Host %s", req.method, req.path, host)
			require.JSONEq(t, statusBody(403, "Forbidden", foreignHostMessage), body)
			require.NotContains(t, body, "rebound", "the Host is not quoted")
		}
	}
	for _, host := range []string{"", "localhost:" + port, "LOCALHOST", "localhost.", "127.0.0.1", "127.0.0.1:" + port, "127.9.8.7:" + port, "[::1]:" + port, "[::1]"} {
		code, body := call(t, s, http.MethodGet, one, host, "", nil)
		require.Equal(t, 200, code, "Host %q: %s", host, body)
	}
	require.Equal(t, int64(1), getAPI(t, s, "endpoints.v1").Status.RequestCount, "no batch with a foreign Host was taken")
}

// With credentials, Host does not matter: a reverse proxy or a Service
// name reaches Sunset by another name, and credentials decide.
func TestAuthenticatedLoopbackTakesAnyHost(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	cfg.TokenAuthFile = testpki.WriteFile(t, dir, "readers.csv", []byte("reader-token,alice,1001,\"sunset:readers\"\n"))
	cfg.WebhookTokenFile = testpki.WriteFile(t, dir, "webhook-token", []byte("hook-token\n"))
	s := start(t, cfg)
	code, body := call(t, s, http.MethodPost, "/audit/webhook/n1", "sunset.example", "hook-token", eventList(ev("proxied")))
	require.Equal(t, 200, code, body)
	code, body = call(t, s, http.MethodGet, "/apis/sunset.dev/v1/apirequestcounts/endpoints.v1", "sunset.example", "reader-token", nil)
	require.Equal(t, 200, code, body)
	code, _ = call(t, s, http.MethodGet, "/apis/sunset.dev/v1/apirequestcounts/endpoints.v1", "sunset.example", "", nil)
	require.Equal(t, 401, code)
}
