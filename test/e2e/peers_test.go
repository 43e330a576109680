package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// peerBinaries returns the programs make e2e builds: Sunset,
// kube-apiserver and etcd.
func peerBinaries(t *testing.T) (sunset, apiserver, etcd string) {
	t.Helper()
	return binary(t, "E2E_SUNSET_BIN"), binary(t, "E2E_KUBE_APISERVER_BIN"), binary(t, "E2E_ETCD_BIN")
}

// kubectlBinary is the kubectl on PATH, which .ci/run builds.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is not on PATH; .ci/run builds one (test/e2e/tools)")
	}
	return kubectl
}

// binary returns the path in the environment variable, failing the test
// with how to get it when it is not there.
func binary(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set: run the end-to-end test with `make e2e`", env)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v (run `make e2e`, which builds it)", env, err)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// process is a peer started from a binary, its output kept in a file that
// the test prints the end of when it fails.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func start(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("last lines of %s's output:\n%s", name, tail(logPath, 40))
		}
	})
	return p
}

func (p *process) signal(sig os.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// stop sends sig and waits for the process to exit.
func (p *process) stop(t *testing.T, sig os.Signal, timeout time.Duration) {
	t.Helper()
	p.signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s of %v", p.name, timeout, sig)
	}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitHTTP waits until url answers 200, failing at once if the process
// exits. The peers are separate programs: their own readiness endpoint is
// the hook they offer.
func waitHTTP(t *testing.T, p *process, client *http.Client, url, bearer string, timeout time.Duration) {
	t.Helper()
	waitFor(t, p.name+" to be ready at "+url, timeout, func() error {
		if p.exited() {
			t.Fatalf("%s exited while starting (%v):\n%s", p.name, p.err, tail(p.log, 40))
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		return nil
	})
}

// pki is a test certificate authority and the files signed by it.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CAFile string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sunset-e2e-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &pki{dir: t.TempDir(), caCert: cert, caKey: key}
	p.CAFile = p.write(t, "ca.crt", pemBlock("CERTIFICATE", der))
	return p
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func (p *pki) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue writes a certificate and key for a server (with loopback names) or
// a client (with groups as organizations), returning their paths.
func (p *pki) issue(t *testing.T, name, commonName string, server bool, groups ...string) (certFile, keyFile string) {
	t.Helper()
	return p.issueWithNames(t, name, commonName, server, nil, groups...)
}

// issueWithNames is issue with more DNS names for a server.
func (p *pki) issueWithNames(t *testing.T, name, commonName string, server bool, dnsNames []string, groups ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = append([]string{"localhost"}, dnsNames...)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".crt", pemBlock("CERTIFICATE", der)),
		p.write(t, name+".key", pemBlock("EC PRIVATE KEY", keyDER))
}

// serviceAccountKey writes the RSA key kube-apiserver signs and verifies
// service-account tokens with.
func (p *pki) serviceAccountKey(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, "sa.key", pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)))
}

// httpsClient trusts only the test CA and, given a certificate and key,
// presents them.
func (p *pki) httpsClient(clientCert ...string) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	cfg := &tls.Config{RootCAs: pool}
	if len(clientCert) == 2 {
		pair, err := tls.LoadX509KeyPair(clientCert[0], clientCert[1])
		if err != nil {
			panic(err) // written by issue a moment ago
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// etcd is a running etcd and the client certificate kube-apiserver uses.
type etcd struct {
	url, certFile, keyFile string
}

// startEtcd starts a single-member etcd on loopback that serves TLS and
// requires client certificates.
func startEtcd(t *testing.T, bin string, p *pki) etcd {
	t.Helper()
	serverCert, serverKey := p.issue(t, "etcd-server", "etcd", true)
	clientCert, clientKey := p.issue(t, "etcd-client", "kube-apiserver-etcd-client", false)
	clientURL := "https://127.0.0.1:" + strconv.Itoa(freePort(t))
	peerURL := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	proc := start(t, "etcd", bin,
		"--name=e2e",
		"--data-dir="+t.TempDir(),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--cert-file="+serverCert,
		"--key-file="+serverKey,
		// etcd's own JSON gateway dials its gRPC server with this; it
		// defaults to the server certificate, whose key usage etcd
		// refuses from a client.
		"--client-cert-file="+clientCert,
		"--client-key-file="+clientKey,
		"--trusted-ca-file="+p.CAFile,
		"--client-cert-auth",
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	waitHTTP(t, proc, p.httpsClient(clientCert, clientKey), clientURL+"/health", "", time.Minute)
	return etcd{url: clientURL, certFile: clientCert, keyFile: clientKey}
}

// ctxWithin is a context for one step of the test.
func ctxWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

var errNotYet = errors.New("not yet")
