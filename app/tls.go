package app

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"

	"github.com/kube-sunset/sunset/access"
	"github.com/kube-sunset/sunset/internal/tlsutil"
)

// loadCertPool reads a PEM CA bundle.
func loadCertPool(path string) (*x509.CertPool, error) { return tlsutil.LoadCertPool(path) }

// clientCertTLS asks clients for a certificate and verifies it against the
// webhook's CA and the readers' CAs, whichever signed it. The readers' CAs
// can change at run time (they may come from the cluster), so the pool is
// rebuilt per handshake. No certificate at all is fine here: each handler
// decides what it requires.
func clientCertTLS(cert tls.Certificate, hookCAs *x509.CertPool, acc *access.Access) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool := x509.NewCertPool()
		if hookCAs != nil {
			pool = hookCAs.Clone()
		}
		readers := acc.ClientCABundle()
		pool.AppendCertsFromPEM(readers)
		if hookCAs == nil && len(readers) == 0 {
			return nil, nil
		}
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
		return cfg, nil
	}
	return base
}

// onlyChainsTo hands h the request with only the certificate chains that
// lead to roots: a client certificate signed by another trusted CA is, for
// h, no certificate.
func onlyChainsTo(roots *x509.CertPool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			h.ServeHTTP(w, r)
			return
		}
		certs := r.TLS.PeerCertificates
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		chains, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		state := *r.TLS
		state.VerifiedChains = nil
		if err == nil {
			state.VerifiedChains = chains
		}
		r2 := r.Clone(r.Context())
		r2.TLS = &state
		h.ServeHTTP(w, r2)
	})
}
