// Package tlsutil loads what TLS settings name by path.
package tlsutil

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrNoCertificates is returned, wrapped, for a CA file that holds no PEM
// certificate.
var ErrNoCertificates = errors.New("holds no PEM certificate")

// LoadCertPool reads a PEM CA bundle into a pool. A file that cannot be
// read gives the error of reading it, which names it; a file without a
// single PEM certificate gives "<path> holds no PEM certificate"
// (ErrNoCertificates).
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %w", path, ErrNoCertificates)
	}
	return pool, nil
}
