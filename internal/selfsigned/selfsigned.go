// Package selfsigned makes and keeps the certificate Sunset serves TLS
// with when it is given none, as Kubernetes components do with their
// --cert-dir: a CA of its own and a serving certificate that CA signs,
// kept in a directory so that a restart serves the same certificate and
// clients that trust the CA keep trusting it.
//
// The CA lives ten years and its key stays in the directory, so that the
// serving certificate (one year) is renewed under the same CA: what
// clients were told to trust (an APIService's caBundle, a webhook
// kubeconfig, Prometheus) does not change at a renewal. Publish puts the
// CA where those clients read it.
package selfsigned

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// The files of a cert dir. tls.crt and tls.key are the names of a
// kubernetes.io/tls Secret's keys, so the directory reads like one.
const (
	CAFile   = "ca.crt"
	CAKey    = "ca.key"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// Lifetimes. A serving certificate is renewed RenewBefore its end; a CA
// is made again once it would end before a serving certificate it signs.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
	RenewBefore  = 90 * 24 * time.Hour
)

// LoopbackHosts are in every serving certificate: kubelet's probes,
// `kubectl port-forward` and clients on the host call Sunset by them.
var LoopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// Options say where the certificate is kept and whom it is for.
type Options struct {
	// Dir is the cert dir; it is created (0700) when missing.
	Dir string
	// Hosts are DNS names and IP addresses the serving certificate is
	// for, beside LoopbackHosts.
	Hosts []string
	// Owner names who made the CA, in its common name
	// (sunset-ca@<owner>): Publish keeps one CA per owner in a bundle
	// several replicas share. A pod's name is a good one.
	Owner string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger says what was kept and what was made.
	Logger zerolog.Logger
}

// CommonNamePrefix starts the common name of every CA made here.
const CommonNamePrefix = "sunset-ca@"

// Pair is the certificate served and the CA that signed it.
type Pair struct {
	// Cert is the serving certificate with its key, for tls.Config.
	Cert tls.Certificate
	// Leaf is Cert's certificate, parsed.
	Leaf *x509.Certificate
	// CA is the CA, parsed, and CAPEM its PEM as ca.crt holds it.
	CA    *x509.Certificate
	CAPEM []byte
}

// RenewAt is when the serving certificate is renewed.
func (p *Pair) RenewAt() time.Time { return p.Leaf.NotAfter.Add(-RenewBefore) }

// Ensure returns the certificate kept in o.Dir, making what is missing,
// expiring or not for o.Hosts: a kept CA is used again while it outlives a
// new serving certificate, and a kept serving certificate while the CA
// signed it, it covers every host and it is not within RenewBefore of its
// end. Files are replaced whole (written aside, then renamed), so a crash
// leaves the old ones or the new ones.
func Ensure(o Options) (*Pair, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	hosts := slices.Concat(LoopbackHosts, o.Hosts)
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("cert-dir: %w", err)
	}
	log := o.Logger.With().Str("component", "cert-dir").Str("dir", o.Dir).Logger()

	caCert, caKey, why := loadCA(o.Dir, now())
	if why != "" {
		var err error
		if caCert, caKey, err = newCA(o.Owner, now()); err != nil {
			return nil, err
		}
		if err := writeFile(filepath.Join(o.Dir, CAKey), mustPEMKey(caKey), 0o600); err != nil {
			return nil, err
		}
		if err := writeFile(filepath.Join(o.Dir, CAFile), pemCert(caCert.Raw), 0o644); err != nil {
			return nil, err
		}
		log.Info().Str("reason", why).Time("not_after", caCert.NotAfter).Msg("made a new CA")
	}
	pair, why := loadServing(o.Dir, caCert, hosts, now())
	if why != "" {
		der, key, err := newServing(caCert, caKey, hosts, now())
		if err != nil {
			return nil, err
		}
		if err := writeFile(filepath.Join(o.Dir, KeyFile), mustPEMKey(key), 0o600); err != nil {
			return nil, err
		}
		if err := writeFile(filepath.Join(o.Dir, CertFile), pemCert(der), 0o644); err != nil {
			return nil, err
		}
		if pair, why = loadServing(o.Dir, caCert, hosts, now()); why != "" {
			return nil, fmt.Errorf("cert-dir: the serving certificate just written to %s does not load: %s", o.Dir, why)
		}
		log.Info().Strs("hosts", hosts).Time("not_after", pair.Leaf.NotAfter).Msg("made a new serving certificate")
	}
	pair.CA, pair.CAPEM = caCert, pemCert(caCert.Raw)
	return pair, nil
}

// loadCA reads the kept CA, or says why it cannot be used.
func loadCA(dir string, now time.Time) (*x509.Certificate, crypto.Signer, string) {
	certs, err := cert.CertsFromFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, "no CA: " + err.Error()
	}
	key, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, CAKey))
	if err != nil {
		return nil, nil, "no CA key: " + err.Error()
	}
	ca := certs[0]
	signer, ok := key.(crypto.Signer)
	if !ok || !publicKeysEqual(signer.Public(), ca.PublicKey) {
		return nil, nil, CAKey + " is not the key of " + CAFile
	}
	if !ca.IsCA {
		return nil, nil, CAFile + " is not a CA"
	}
	if !now.Add(CertValidity).Before(ca.NotAfter) {
		return nil, nil, fmt.Sprintf("the CA ends %s, before a new serving certificate would", ca.NotAfter.UTC().Format(time.RFC3339))
	}
	return ca, signer, ""
}

// loadServing reads the kept serving certificate, or says why it cannot
// be served.
func loadServing(dir string, ca *x509.Certificate, hosts []string, now time.Time) (*Pair, string) {
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, "no serving certificate: " + err.Error()
	}
	leaf := c.Leaf
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return nil, "the serving certificate is not signed by the CA"
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return nil, "the serving certificate is not for " + h
		}
	}
	switch {
	case now.Before(leaf.NotBefore):
		return nil, "the serving certificate is not valid yet"
	case !now.Before(leaf.NotAfter.Add(-RenewBefore)): // from RenewAt on, which Keeper.Run wakes at
		return nil, fmt.Sprintf("the serving certificate ends %s, within %s", leaf.NotAfter.UTC().Format(time.RFC3339), RenewBefore)
	}
	return &Pair{Cert: c, Leaf: leaf}, ""
}

func newCA(owner string, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("cert-dir: making the CA key: %w", err)
	}
	// client-go's template (the one kube components' self-signed CAs
	// have), with the lifetime set here.
	tmpl, err := cert.NewSelfSignedCACert(cert.Config{CommonName: CommonNamePrefix + owner}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("cert-dir: making the CA: %w", err)
	}
	tmpl.NotBefore = now.Add(-time.Hour) // a clock slightly behind still accepts it
	tmpl.NotAfter = now.Add(CAValidity)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("cert-dir: making the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func newServing(ca *x509.Certificate, caKey crypto.Signer, hosts []string, now time.Time) ([]byte, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("cert-dir: making the serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial.Add(serial, big.NewInt(1)),
		Subject:      pkix.Name{CommonName: hosts[min(len(LoopbackHosts), len(hosts)-1)]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(CertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("cert-dir: making the serving certificate: %w", err)
	}
	return der, key, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: der})
}

func mustPEMKey(key crypto.Signer) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		// Only for a key type this package never makes.
		panic(fmt.Sprintf("selfsigned: marshalling a %T: %v", key, err))
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// writeFile replaces path whole: a crash leaves the old file or the new.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("cert-dir: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("cert-dir: %w", err)
	}
	return nil
}

// Keeper serves the kept certificate and renews it while Sunset runs.
type Keeper struct {
	o       Options
	current atomic.Pointer[Pair]
	renewed chan struct{}
}

// NewKeeper ensures the certificate (see Ensure) and keeps it.
func NewKeeper(o Options) (*Keeper, error) {
	p, err := Ensure(o)
	if err != nil {
		return nil, err
	}
	k := &Keeper{o: o, renewed: make(chan struct{}, 1)}
	k.current.Store(p)
	return k, nil
}

// Current is the pair being served.
func (k *Keeper) Current() *Pair { return k.current.Load() }

// GetCertificate is tls.Config's, so that a renewal takes effect at the
// next handshake.
func (k *Keeper) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &k.current.Load().Cert, nil
}

// Renewed receives a token after each renewal that changed the CA, for
// Publish to run again.
func (k *Keeper) Renewed() <-chan struct{} { return k.renewed }

// retryAfter is how long a failed renewal waits for another try.
const retryAfter = time.Hour

// Run renews the serving certificate at its RenewAt, until ctx is done.
// A failed renewal (a full disk, say) is logged and tried again an hour
// later; the current certificate is served meanwhile, months before it
// ends.
func (k *Keeper) Run(ctx context.Context) {
	now := time.Now
	if k.o.Now != nil {
		now = k.o.Now
	}
	for {
		wait := k.Current().RenewAt().Sub(now())
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		before := k.Current()
		p, err := Ensure(k.o)
		if err != nil {
			k.o.Logger.Error().Err(err).Str("component", "cert-dir").Dur("retry_in", retryAfter).
				Msg("cannot renew the serving certificate; still serving the current one")
			t := time.NewTimer(retryAfter)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		k.current.Store(p)
		if !bytes.Equal(before.CAPEM, p.CAPEM) {
			select {
			case k.renewed <- struct{}{}:
			default:
			}
		}
	}
}
