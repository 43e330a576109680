package app_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"

	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

// With tls-client-ca-file and webhook-token-file the webhook demands both;
// the real webhook client sends them from its kubeconfig, and the node
// comes from the certificate's common name.
func TestWebhookClientCertificateAndToken(t *testing.T) {
	cfg := testConfig(t)
	var serverPEM []byte
	cfg.TLSCertFile, cfg.TLSKeyFile, serverPEM = selfSigned(t)
	caPEM, certPEM, keyPEM := clientCert(t, "master-7")
	dir := t.TempDir()
	cfg.TLSClientCAFile = filepath.Join(dir, "client-ca.crt")
	cfg.WebhookTokenFile = filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(cfg.TLSClientCAFile, caPEM, 0o600))
	require.NoError(t, os.WriteFile(cfg.WebhookTokenFile, []byte("s3cret-token\n"), 0o600))
	s := start(t, cfg)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(serverPEM)
	s.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	// Without a certificate, or with one but without the token: 401.
	code, body := s.post("/audit/webhook", "application/json", eventList(ev("a1")))
	require.Equal(t, 401, code)
	require.JSONEq(t, statusBody(401, "Unauthorized", "a client certificate signed by tls-client-ca-file is required (set client-certificate in the webhook kubeconfig)"), string(body))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	s.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
	for _, auth := range []string{"", "Bearer wrong", "Basic czNjcmV0LXRva2Vu"} {
		req, err := http.NewRequest(http.MethodPost, s.url+"/audit/webhook", strings.NewReader(string(eventList(ev("a1")))))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		code, body = s.do(req)
		require.Equal(t, 401, code, auth)
		require.JSONEq(t, statusBody(401, "Unauthorized", "a valid bearer token is required (set token in the webhook kubeconfig to the contents of webhook-token-file)"), string(body))
	}
	// The read API and /metrics need neither.
	code, _ = s.get("/metrics")
	require.Equal(t, 200, code)

	user := "\n    token: s3cret-token\n    client-certificate-data: " + base64.StdEncoding.EncodeToString(certPEM) +
		"\n    client-key-data: " + base64.StdEncoding.EncodeToString(keyPEM)
	sendThroughWebhook(t, realWebhookWithUser(t, s.url+"/audit/webhook", user, serverPEM), "auth", time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC),
		[]traffic{{n: 4, user: "alice", agent: "kubectl/v1.32.4", verb: "get", ref: &auditinternal.ObjectReference{Resource: "endpoints", APIVersion: "v1"}, deprecated: true}})
	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(4), ep.Status.RequestCount)
	require.Equal(t, "master-7", ep.Status.CurrentHour.ByNode[0].NodeName, "the node is the certificate's common name")
}

// clientCert issues a client certificate for cn, with names as DNS or IP
// subject alternative names, from a fresh CA, and returns the CA and the
// certificate and key, all PEM.
func clientCert(t *testing.T, cn string, names ...string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	ca := testpki.NewCA(t, "apiserver-client-ca")
	pair := ca.ClientNamed(t, cn, names...)
	return ca.PEM, pair.CertPEM, pair.KeyPEM
}
