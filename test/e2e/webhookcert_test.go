package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations kube-apiserver adds when it calls a webhook server whose
// certificate is signed with SHA-1 or has no subjectAltName
// (k8s.io/apiserver/pkg/util/x509metrics), keyed by the host it called.
const (
	insecureSHA1Prefix = "insecure-sha1.invalid-cert.kubernetes.io/"
	missingSANPrefix   = "missing-san.invalid-cert.kubernetes.io/"
	insecureSHA1Reason = "uses an insecure SHA-1 signature"
	missingSANReason   = "relies on a legacy Common Name field instead of the SAN extension for subject validation"
)

// certProblem is one webhook server's flagged certificate on one resource.
type certProblem struct{ Host, Problem, Resource string }

// A real kube-apiserver v1.36.3 calls webhook servers the test runs with a
// SHA-1-signed certificate (at 127.0.0.1) and with a certificate without
// SAN (at localhost): it refuses both, and still says so in the audit log.
// Sunset's counts of those servers, its metric and its upgrade gate agree
// with the apiserver's own audit log.
func TestWebhookCertificateProblemsEqualTheAuditLog(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	s, token := startSunset(t, sunsetBin, p)
	kubeconfig := webhookKubeconfig(t, p, s.url+"/audit/webhook/"+clusterName+"/"+nodeName, token)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p, kubeconfig)

	// A leaf signed with SHA-1 by the CA kube-apiserver is given as
	// caBundle, and one signed properly whose only name is its Common Name.
	sha1Server := serveHandshakes(t, "127.0.0.1", p.leaf(t, &x509.Certificate{Subject: pkix.Name{CommonName: "sha1-webhook"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, SignatureAlgorithm: x509.ECDSAWithSHA1}))
	noSANServer := serveHandshakes(t, "localhost", p.leaf(t, &x509.Certificate{Subject: pkix.Name{CommonName: "localhost"}}))

	ctx := ctxWithin(t, 5*time.Minute)
	admin := a.as(t, "admin", "e2e-certificates/1.0")
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "certs"}}, metav1.CreateOptions{})
	must(t, "creating namespace", err)
	registerCertificateWebhooks(ctx, t, a, sha1Server.url, noSANServer.url, p)

	// The apiserver picks webhook configurations up asynchronously: dry
	// runs probe until it has tried both servers on configmaps and refuses
	// secrets. The servers never get a request, only handshakes.
	waitFor(t, "the apiserver to call the webhook servers", time.Minute, func() error {
		_, err := admin.CoreV1().ConfigMaps("certs").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		_, err = admin.CoreV1().Secrets("certs").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || sha1Server.handshakes.Load() == 0 || noSANServer.handshakes.Load() == 0 {
			return errNotYet
		}
		return nil
	})

	const configMaps, secrets = 3, 2
	for i := range configMaps {
		_, err := admin.CoreV1().ConfigMaps("certs").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}},
			metav1.CreateOptions{})
		must(t, "creating a configmap (its webhooks fail open)", err)
	}
	for i := range secrets {
		_, err := admin.CoreV1().Secrets("certs").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)}},
			metav1.CreateOptions{})
		if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "x509: ") {
			t.Fatalf("creating a secret through a webhook with a SHA-1 certificate and failurePolicy Fail: %v, want an internal error from x509", err)
		}
	}

	a.proc.stop(t, syscall.SIGTERM, 2*time.Minute)
	truth := certificateTruth(t, a.auditLog)
	// kube-apiserver v1.36.3 still records them: the test's own requests
	// are there, beside the probes.
	for _, want := range []struct {
		key   certProblem
		least int64
	}{
		{certProblem{"127.0.0.1", "insecure-sha1", "configmaps.v1"}, configMaps},
		{certProblem{"localhost", "missing-san", "configmaps.v1"}, configMaps},
		{certProblem{"127.0.0.1", "insecure-sha1", "secrets.v1"}, secrets},
	} {
		if truth[want.key] < want.least {
			t.Errorf("audit log: %+v flagged on %d requests, want at least the test's %d", want.key, truth[want.key], want.least)
		}
	}
	if len(truth) != 3 {
		t.Errorf("audit log: %v, want exactly the three servers and resources of the test", truth)
	}
	if t.Failed() {
		t.FailNow()
	}

	var got map[certProblem]int64
	waitFor(t, "Sunset's certificate counts to equal the audit log", time.Minute, func() error {
		got = sunsetCertificates(t, s)
		if !maps.Equal(got, truth) {
			return fmt.Errorf("Sunset %v, audit log %v", got, truth)
		}
		return nil
	})

	// The metric counts each request and server once.
	bySHA1 := truth[certProblem{"127.0.0.1", "insecure-sha1", "configmaps.v1"}] + truth[certProblem{"127.0.0.1", "insecure-sha1", "secrets.v1"}]
	metric := map[string]float64{}
	for _, m := range scrape(t, s.client, s.url+"/metrics", "")["sunset_admission_webhook_certificate_problems_total"].GetMetric() {
		if label(m, "cluster") == clusterName {
			metric[label(m, "problem")] = m.GetCounter().GetValue()
		}
	}
	if want := map[string]float64{"insecure-sha1": float64(bySHA1),
		"missing-san": float64(truth[certProblem{"localhost", "missing-san", "configmaps.v1"}])}; !maps.Equal(metric, want) {
		t.Errorf("sunset_admission_webhook_certificate_problems_total: %v, want %v", metric, want)
	}

	// The upgrade gate: 1.37 refuses both servers; 1.22 refuses neither
	// whatever its settings.
	var check struct {
		Status struct {
			ExitCode            int    `json:"exitCode"`
			Message             string `json:"message"`
			WebhookCertificates []struct {
				Host, Problem, Severity string
				Requests                int64
			} `json:"webhookCertificates"`
		} `json:"status"`
	}
	getSunsetJSON(t, s, "/apis/sunset.dev/v1/upgradechecks/1.37?cluster="+clusterName, &check)
	var findings []string
	for _, f := range check.Status.WebhookCertificates {
		findings = append(findings, f.Host+" "+f.Problem+" "+f.Severity+" "+strconv.FormatInt(f.Requests, 10))
	}
	slices.Sort(findings)
	wantFindings := []string{"127.0.0.1 insecure-sha1 refused " + strconv.FormatInt(bySHA1, 10),
		"localhost missing-san refused " + strconv.FormatInt(truth[certProblem{"localhost", "missing-san", "configmaps.v1"}], 10)}
	if check.Status.ExitCode != 3 || !slices.Equal(findings, wantFindings) {
		t.Errorf("upgradechecks/1.37: exit code %d, %v; want 3, %v (%s)", check.Status.ExitCode, findings, wantFindings, check.Status.Message)
	}
	getSunsetJSON(t, s, "/apis/sunset.dev/v1/upgradechecks/1.22?cluster="+clusterName, &check)
	for _, f := range check.Status.WebhookCertificates {
		if f.Severity != "deprecated" {
			t.Errorf("upgradechecks/1.22: %+v, want a warning only", f)
		}
	}
	t.Logf("Sunset equals the audit log: %v; %s", got, check.Status.Message)
}

// leaf issues a server certificate from tmpl with the test CA, with
// nothing added: no SAN unless tmpl has one.
func (p *pki) leaf(t *testing.T, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage, tmpl.ExtKeyUsage = x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// handshakeServer is a webhook server that counts the TLS handshakes
// clients begin; kube-apiserver refuses its certificate, so no request
// ever reaches a handler.
type handshakeServer struct {
	url        string
	handshakes atomic.Int64
}

func serveHandshakes(t *testing.T, host string, cert tls.Certificate) *handshakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, "listening", err)
	hs := &handshakeServer{url: "https://" + host + ":" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)}
	// The refused handshakes are the test's point, not news.
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "kube-apiserver should have refused this certificate", http.StatusInternalServerError)
		}),
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			hs.handshakes.Add(1)
			return &cert, nil
		}}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return hs
}

// registerCertificateWebhooks: on configmaps, a mutating webhook served by
// the SHA-1 server and a validating one by the server without SAN, both
// failing open; on secrets, a validating webhook of the SHA-1 server that
// fails closed.
func registerCertificateWebhooks(ctx context.Context, t *testing.T, a *apiserver, sha1URL, noSANURL string, p *pki) {
	t.Helper()
	ca, err := os.ReadFile(p.CAFile)
	must(t, "reading the CA", err)
	client := a.as(t, "admin", "e2e-certificates/1.0").AdmissionregistrationV1()
	none := admissionregistrationv1.SideEffectClassNone
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	timeout := int32(5)
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	rule := func(resource string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: create,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}
	}
	inNamespace := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "certs"}}
	config := func(u string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}
	}
	_, err = client.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-sha1-injector"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "inject.sha1.e2e.example.com", ClientConfig: config(sha1URL + "/mutate"),
			Rules: rule("configmaps"), NamespaceSelector: inNamespace, FailurePolicy: &ignore, SideEffects: &none, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{})
	must(t, "creating the mutating webhook configuration", err)
	_, err = client.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-certificate-checks"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "policy.nosan.e2e.example.com", ClientConfig: config(noSANURL + "/validate"), Rules: rule("configmaps"),
				NamespaceSelector: inNamespace, FailurePolicy: &ignore, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"}},
			{Name: "guard.sha1.e2e.example.com", ClientConfig: config(sha1URL + "/validate"), Rules: rule("secrets"),
				NamespaceSelector: inNamespace, FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"}},
		},
	}, metav1.CreateOptions{})
	must(t, "creating the validating webhook configuration", err)
}

// certificateTruth reads kube-apiserver's audit log: per host, problem and
// resource, the completed requests whose annotations flag it, each value
// checked against kube-apiserver's sentence.
func certificateTruth(t *testing.T, path string) map[certProblem]int64 {
	t.Helper()
	out := map[certProblem]int64{}
	eachCompleted(t, path, func(ev *auditEvent) {
		for key, v := range ev.Annotations {
			var k certProblem
			switch {
			case strings.HasPrefix(key, insecureSHA1Prefix):
				k = certProblem{strings.TrimPrefix(key, insecureSHA1Prefix), "insecure-sha1", ev.resource()}
				if v != insecureSHA1Reason {
					t.Errorf("%s: %q", key, v)
				}
			case strings.HasPrefix(key, missingSANPrefix):
				k = certProblem{strings.TrimPrefix(key, missingSANPrefix), "missing-san", ev.resource()}
				if v != missingSANReason {
					t.Errorf("%s: %q", key, v)
				}
			default:
				continue
			}
			out[k]++
		}
	})
	return out
}

// sunsetCertificates reads the flagged servers of Sunset's webhook counts
// of the last 24 hours.
func sunsetCertificates(t *testing.T, s *sunsetServer) map[certProblem]int64 {
	t.Helper()
	var list struct {
		Certificates []struct {
			Cluster, Host, Problem string
			ByResource             []struct {
				Name         string `json:"name"`
				RequestCount int64  `json:"requestCount"`
			} `json:"byResource"`
		} `json:"certificates"`
	}
	getSunsetJSON(t, s, "/apis/sunset.dev/v1/webhookcounts", &list)
	out := map[certProblem]int64{}
	for _, c := range list.Certificates {
		for _, r := range c.ByResource {
			out[certProblem{c.Host, c.Problem, r.Name}] += r.RequestCount
		}
	}
	return out
}
