package test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-sunset/sunset/internal/selfsigned"
	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

// testPKI is a CA, a serving certificate for 127.0.0.1 and a client
// certificate with CN master-0, as PEM.
type testPKI struct {
	caPEM, certPEM, keyPEM, clientCertPEM, clientKeyPEM []byte
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	ca := testpki.NewCA(t, "sunset test CA")
	server := ca.Server(t, "127.0.0.1", "localhost", "sunset.sunset.svc")
	client := ca.Client(t, "master-0")
	return testPKI{caPEM: ca.PEM, certPEM: server.CertPEM, keyPEM: server.KeyPEM, clientCertPEM: client.CertPEM, clientKeyPEM: client.KeyPEM}
}

// localRun is a rendered container running here: its base URL, and the
// CA that signed the certificate it serves.
type localRun struct {
	url   string
	caPEM []byte
}

// runRendered starts the binary as the rendered StatefulSet's container
// runs it and checks every probe against it, once the server has logged
// readyAfter when that is given. A certificate Sunset makes is kept in
// its cert dir, whose ca.crt clients then trust; with the certificate of
// a Secret, its ca.crt. There is no cluster here to publish a CA in, so
// --publish-ca-secret is left out.
func runRendered(t *testing.T, r *rendered, secrets map[string]map[string][]byte, readyAfter string) localRun {
	t.Helper()
	spec := r.sts.Spec.Template.Spec
	args, dataDir := localPod(t, spec, map[string]corev1.ConfigMap{r.cm.Name: r.cm}, secrets)
	args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--publish-ca-secret=") })
	p := startBinary(t, dataDir, args...)
	if readyAfter != "" {
		p.waitLogged(t, readyAfter, time.Minute)
	}
	run := localRun{url: p.url}
	for _, a := range args {
		if dir, ok := strings.CutPrefix(a, "--cert-dir="); ok {
			ca, err := os.ReadFile(filepath.Join(dir, selfsigned.CAFile))
			require.NoError(t, err, "Sunset keeps its CA in its cert dir")
			run.caPEM = ca
		}
		if strings.HasPrefix(a, "--tls-cert-file=") {
			run.caPEM = secrets["sunset-tls"]["ca.crt"]
		}
	}
	if run.caPEM != nil {
		run.url = "https://" + strings.TrimPrefix(run.url, "http://")
	}
	c := spec.Containers[0]
	for _, probe := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		requireStatus(t, probeClient(), run.url+probe.HTTPGet.Path, http.StatusOK)
	}
	return run
}

// baseSecrets' contents for a local run: a serving certificate for
// 127.0.0.1 and one webhook token, for cluster default's apiserver
// master-0 (the client certificate's common name).
func baseSecretData(pki testPKI) map[string]map[string][]byte {
	return map[string]map[string][]byte{
		"sunset-tls":            {"tls.crt": pki.certPEM, "tls.key": pki.keyPEM, "ca.crt": pki.caPEM},
		"sunset-webhook-tokens": {"tokens.csv": []byte("master-0-token,default/master-0,master-0\nmaster-1-token,default/master-1,master-1\n")},
	}
}

// webhookPoster posts a real kube-apiserver batch to Sunset over HTTPS,
// verifying its certificate, with the given client certificates and token,
// and returns the status.
func webhookPoster(t *testing.T, run localRun) func(path string, certs []tls.Certificate, token string) int {
	url := run.url
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(run.caPEM))
	body, err := os.ReadFile("../testdata/apiserver-v1.36/webhook-metadata-batch/00004.body")
	require.NoError(t, err)
	return func(path string, certs []tls.Certificate, token string) int {
		t.Helper()
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
		req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
}

// Sunset starts with exactly the base's arguments, config file and
// Secret, serves HTTPS with the certificate it made in its cert dir (a
// client that trusts that ca.crt verifies it), passes its probes without
// credentials, and takes a batch only with an apiserver's own token on
// that apiserver's path.
func TestKustomizeBaseConfigRunsInSunset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	kubectl(t)
	run := runRendered(t, render(t, "kubernetes/base"), baseSecretData(newTestPKI(t)), "")
	url := run.url
	require.True(t, strings.HasPrefix(url, "https://"), url)
	post := webhookPoster(t, run)
	require.Equal(t, http.StatusUnauthorized, post("/audit/webhook/default/master-0", nil, ""))
	require.Equal(t, http.StatusUnauthorized, post("/audit/webhook/default/master-0", nil, "not-a-token"))
	require.Equal(t, http.StatusForbidden, post("/audit/webhook/default/master-0", nil, "master-1-token"), "another apiserver's token")
	require.Equal(t, http.StatusOK, post("/audit/webhook/default/master-0", nil, "master-0-token"))

	// Plain HTTP on the same port gets no answer that a token could
	// follow: the listener speaks TLS only.
	plain := "http://" + strings.TrimPrefix(url, "https://")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(plain + "/-/ready")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "Go's TLS server answers plain HTTP with 400")
	}
}

// The TLS overlay adds webhook client certificates: the webhook demands an
// apiserver's token and a certificate from the CA, and the probes need
// neither.
func TestKustomizeTLSOverlayRunsInSunset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	kubectl(t)
	pki := newTestPKI(t)
	run := runRendered(t, render(t, "kubernetes/overlays/tls"), baseSecretData(pki), "")
	require.True(t, strings.HasPrefix(run.url, "https://"))
	require.Equal(t, pki.caPEM, run.caPEM, "the certificate of Secret sunset-tls")
	clientCert, err := tls.X509KeyPair(pki.clientCertPEM, pki.clientKeyPEM)
	require.NoError(t, err)
	post := webhookPoster(t, run)
	// The certificate names the node only, so the path names no cluster.
	const path = "/audit/webhook/master-0"
	require.Equal(t, http.StatusUnauthorized, post(path, nil, ""))
	require.Equal(t, http.StatusUnauthorized, post(path, nil, "master-0-token"))
	require.Equal(t, http.StatusUnauthorized, post(path, []tls.Certificate{clientCert}, ""))
	require.Equal(t, http.StatusOK, post(path, []tls.Certificate{clientCert}, "master-0-token"))
}

// The Kafka overlay's config, CA file and password from the environment
// get the consumer into its group on a broker with TLS and SCRAM.
func TestKustomizeKafkaOverlayRunsInSunset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	kubectl(t)
	r := render(t, "kubernetes/overlays/kafka")
	kafkaCfg := sunsetConfig(t, r)["kafka"].(map[string]any)
	sasl := kafkaCfg["sasl"].(map[string]any)
	var topics []string
	for _, tp := range kafkaCfg["topics"].([]any) {
		topics = append(topics, tp.(string))
	}
	pki := newTestPKI(t)
	serverCert, err := tls.X509KeyPair(pki.certPEM, pki.keyPEM)
	require.NoError(t, err)
	const password = "kafka-test-password"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser(strings.ToUpper(sasl["mechanism"].(string)), sasl["username"].(string), password))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	// The config's brokers are examples; the environment beats the file.
	t.Setenv("SUNSET_KAFKA_BROKERS", strings.Join(cluster.ListenAddrs(), ","))
	secrets := baseSecretData(pki)
	secrets["sunset-kafka"] = map[string][]byte{"ca.crt": pki.caPEM, "password": []byte(password)}
	runRendered(t, r, secrets, "joined consumer group")
}
