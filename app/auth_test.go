package app_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
)

// clientCert issues a client certificate for cn, with sans as DNS or IP
// subject alternative names, from a fresh CA, and returns the CA and the
// certificate and key, all PEM.
func clientCert(t *testing.T, cn string, sans ...string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(10), Subject: pkix.Name{CommonName: "apiserver-client-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(11), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, san := range sans {
		if ip := net.ParseIP(san); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, san)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

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
