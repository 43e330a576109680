// Package testpki issues throwaway certificate authorities and
// certificates for tests that need real TLS: servers, client certificates
// and front-proxy certificates.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate.
	PEM    []byte
	serial int64
}

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
}

// Pair is a certificate and its key, PEM.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// TLS is the pair as a tls.Certificate.
func (p Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Client issues a client certificate: cn is the user, orgs the groups.
func (ca *CA) Client(t testing.TB, cn string, orgs ...string) Pair {
	return ca.issue(t, pkix.Name{CommonName: cn, Organization: orgs}, x509.ExtKeyUsageClientAuth, nil)
}

// ClientNamed issues a client certificate for cn that also names the
// client by names (DNS names or IPs), as an apiserver's may.
func (ca *CA) ClientNamed(t testing.TB, cn string, names ...string) Pair {
	return ca.issue(t, pkix.Name{CommonName: cn}, x509.ExtKeyUsageClientAuth, names)
}

// Apiserver issues the client certificate of kube-apiserver node of
// cluster for Sunset's webhook: O=<cluster>, CN=<node>, with names as
// subject alternative names (DNS names or IPs). An empty cluster leaves
// out the organization, as a certificate made before clusters had one.
func (ca *CA) Apiserver(t testing.TB, cluster, node string, names ...string) Pair {
	subject := pkix.Name{CommonName: node}
	if cluster != "" {
		subject.Organization = []string{cluster}
	}
	return ca.issue(t, subject, x509.ExtKeyUsageClientAuth, names)
}

// Server issues a serving certificate for the names (DNS names or IPs).
func (ca *CA) Server(t testing.TB, names ...string) Pair {
	return ca.issue(t, pkix.Name{CommonName: names[0]}, x509.ExtKeyUsageServerAuth, names)
}

func (ca *CA) issue(t testing.TB, subject pkix.Name, usage x509.ExtKeyUsage, names []string) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
}

// Pool is a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// WriteFile writes data to a new file in dir and returns its path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
