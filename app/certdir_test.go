package app_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/selfsigned"
	"github.com/kube-sunset/sunset/internal/testutil/testpki"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// certDirFiles reads the four files of a cert dir.
func certDirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range []string{selfsigned.CAFile, selfsigned.CAKey, selfsigned.CertFile, selfsigned.KeyFile} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		out[name] = raw
	}
	return out
}

// trusting is a client that trusts only the CA in caPEM.
func trusting(t *testing.T, caPEM []byte) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM), "ca.crt holds a certificate")
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

// getStatus GETs url and returns the status and body.
func getStatus(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err, url)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// Off loopback without tls-cert-file, Sunset serves HTTPS with a
// certificate of its own in <data-dir>/certs; a client that trusts that
// ca.crt connects by any loopback name and the names of cert-hosts. A
// restart serves the very same certificate, so what clients were told
// to trust stays true.
func TestSelfSignedCertificateIsMadeAndKept(t *testing.T) {
	cfg := testConfig(t)
	cfg.Listen = "0.0.0.0:0"
	cfg.WebhookAllowUnauthenticated, cfg.AllowUnauthenticated = true, true
	cfg.CertHosts = []string{"sunset.sunset.svc", "192.0.2.80"}
	dir := filepath.Join(cfg.DataDir, "certs")
	require.Equal(t, dir, cfg.CertDirPath())

	s := testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t)})
	require.True(t, s.App.TLS())
	_, port, err := net.SplitHostPort(s.App.Addr().String())
	require.NoError(t, err)
	first := certDirFiles(t, dir)
	client := trusting(t, first[selfsigned.CAFile])
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		if host == "::1" && !ipv6Loopback() {
			continue
		}
		code, body := getStatus(t, client, "https://"+net.JoinHostPort(host, port)+"/-/ready")
		require.Equal(t, http.StatusOK, code, "%s: %s", host, body)
	}
	// The same certificate by the Service's name and address.
	leaf, err := tls.X509KeyPair(first[selfsigned.CertFile], first[selfsigned.KeyFile])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(first[selfsigned.CAFile])
	for _, name := range cfg.CertHosts {
		_, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots})
		require.NoError(t, err, name)
	}
	// Plain HTTP gets nothing a token could follow.
	code, _ := getStatus(t, &http.Client{Timeout: 5 * time.Second}, "http://127.0.0.1:"+port+"/-/ready")
	require.Equal(t, http.StatusBadRequest, code, "Go's TLS server answers plain HTTP with 400")
	s.Stop()

	again := testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t)})
	require.Equal(t, first, certDirFiles(t, dir), "kept across the restart, byte for byte")
	_, port, err = net.SplitHostPort(again.App.Addr().String())
	require.NoError(t, err)
	code, body := getStatus(t, client, "https://127.0.0.1:"+port+"/-/ready")
	require.Equal(t, http.StatusOK, code, body)
}

func ipv6Loopback() bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

// On loopback Sunset serves plain HTTP and makes no certificate, unless
// cert-dir is set; with tls-cert-file it serves that and makes none
// either.
func TestCertDirOnlyWhenSunsetMakesTheCertificate(t *testing.T) {
	cfg := testConfig(t)
	s := testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t)})
	require.False(t, s.App.TLS())
	code, body := getStatus(t, &http.Client{Timeout: 5 * time.Second}, "http://"+s.App.Addr().String()+"/-/ready")
	require.Equal(t, http.StatusOK, code, body)
	_, err := os.Stat(cfg.CertDirPath())
	require.ErrorIs(t, err, os.ErrNotExist, "no cert dir on plain loopback")

	cfg = testConfig(t)
	cfg.CertDir = filepath.Join(t.TempDir(), "tls")
	s = testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t)})
	require.True(t, s.App.TLS())
	code, body = getStatus(t, trusting(t, certDirFiles(t, cfg.CertDir)[selfsigned.CAFile]), "https://"+s.App.Addr().String()+"/-/ready")
	require.Equal(t, http.StatusOK, code, body)

	ca := testpki.NewCA(t, "given CA")
	pair := ca.Server(t, "127.0.0.1")
	dir := t.TempDir()
	cfg = testConfig(t)
	cfg.Listen = "0.0.0.0:0"
	cfg.WebhookAllowUnauthenticated, cfg.AllowUnauthenticated = true, true
	cfg.TLSCertFile, cfg.TLSKeyFile = testpki.WriteFile(t, dir, "tls.crt", pair.CertPEM), testpki.WriteFile(t, dir, "tls.key", pair.KeyPEM)
	s = testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t)})
	_, port, err := net.SplitHostPort(s.App.Addr().String())
	require.NoError(t, err)
	code, body = getStatus(t, trusting(t, ca.PEM), "https://127.0.0.1:"+port+"/-/ready")
	require.Equal(t, http.StatusOK, code, body)
	_, err = os.Stat(cfg.CertDirPath())
	require.ErrorIs(t, err, os.ErrNotExist, "no cert dir beside a given certificate")
}

// The cert-dir keys are refused where Sunset makes no certificate, and
// a CA to publish needs a cluster to publish it in.
func TestCertDirKeysAreChecked(t *testing.T) {
	dir := t.TempDir()
	file := testpki.WriteFile(t, dir, "f", []byte("x"))
	cfg := testConfig(t)
	cfg.TLSCertFile, cfg.TLSKeyFile = file, file
	cfg.CertDir, cfg.CertHosts, cfg.PublishCASecret = dir, []string{"sunset.sunset.svc"}, "sunset/sunset-ca"
	why := ": is for the certificate Sunset makes for itself, and it makes none: tls-cert-file is set, and Sunset serves that certificate"
	require.EqualError(t, cfg.Validate(), "cert-dir"+why+"\ncert-hosts"+why+"\npublish-ca-secret"+why)

	cfg = testConfig(t)
	cfg.CertHosts = []string{"sunset.sunset.svc"}
	require.EqualError(t, cfg.Validate(), "cert-hosts: is for the certificate Sunset makes for itself, and it makes none: "+
		"Sunset serves plain HTTP on a loopback listen address unless cert-dir is set")

	cfg = testConfig(t)
	cfg.CertDir = dir
	cfg.CertHosts = []string{"10.96.0.80", "sunset.sunset.svc", "*.sunset.svc", "not a name"}
	cfg.PublishCASecret = "sunset-ca"
	require.EqualError(t, cfg.Validate(), `cert-hosts[3]: "not a name" is neither an IP address nor a DNS name (sunset.sunset.svc)`+"\n"+
		`publish-ca-secret: "sunset-ca" is not namespace/name (for example sunset/sunset-ca)`)

	cfg.CertHosts, cfg.PublishCASecret = nil, "sunset/sunset-ca"
	require.NoError(t, cfg.Validate())
	_, err := app.New(cfg, app.Options{})
	require.EqualError(t, err, "publish-ca-secret: there is no cluster to publish sunset/sunset-ca in: run in a pod with a service-account token, "+
		"set authentication-kubeconfig, or leave publish-ca-secret empty and hand out ca.crt of "+dir+" yourself")
}
