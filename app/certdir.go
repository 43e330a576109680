package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/internal/selfsigned"
)

// SelfSigned reports whether Sunset serves HTTPS with a certificate it
// makes and keeps in cert-dir: without tls-cert-file, on a listen address
// that is not loopback (where plain HTTP would carry bearer tokens in
// cleartext), or wherever cert-dir is set.
func (c Config) SelfSigned() bool {
	return c.TLSCertFile == "" && (c.CertDir != "" || !LoopbackListen(c.Listen))
}

// ServesTLS reports whether Sunset serves HTTPS, with tls-cert-file or a
// certificate of its own.
func (c Config) ServesTLS() bool { return c.TLSCertFile != "" || c.SelfSigned() }

// CertDirPath is cert-dir, or its default under the data directory.
func (c Config) CertDirPath() string {
	if c.CertDir != "" {
		return c.CertDir
	}
	return filepath.Join(c.DataDir, "certs")
}

// validateCertDir checks the keys of the certificate Sunset makes: they
// mean something only when it makes one.
func (c Config) validateCertDir(bad func(key, format string, args ...any)) {
	for i, h := range c.CertHosts {
		if net.ParseIP(h) == nil && len(validation.IsDNS1123Subdomain(strings.TrimPrefix(h, "*."))) > 0 {
			bad(fmt.Sprintf("cert-hosts[%d]", i), "%q is neither an IP address nor a DNS name (sunset.sunset.svc)", h)
		}
	}
	if c.PublishCASecret != "" {
		if _, err := selfsigned.ParseSecretRef(c.PublishCASecret); err != nil {
			bad("publish-ca-secret", "%v", err)
		}
	}
	if c.SelfSigned() {
		return
	}
	why := "tls-cert-file is set, and Sunset serves that certificate"
	if c.TLSCertFile == "" {
		why = "Sunset serves plain HTTP on a loopback listen address unless cert-dir is set"
	}
	for _, k := range []struct {
		key string
		set bool
	}{{"cert-dir", c.CertDir != ""}, {"cert-hosts", len(c.CertHosts) > 0}, {"publish-ca-secret", c.PublishCASecret != ""}} {
		if k.set {
			bad(k.key, "is for the certificate Sunset makes for itself, and it makes none: %s", why)
		}
	}
}

// newCertKeeper makes or loads the certificate of cert-dir.
func (a *App) newCertKeeper() (*selfsigned.Keeper, error) {
	owner, err := os.Hostname()
	if err != nil {
		owner = "sunset"
	}
	return selfsigned.NewKeeper(selfsigned.Options{Dir: a.cfg.CertDirPath(), Hosts: a.cfg.CertHosts, Owner: owner, Logger: a.log})
}

// publishCAEvery is how often the published CA is looked at again.
const publishCAEvery = time.Hour

// caPublisher publishes the CA of cert-dir in publish-ca-secret, through
// authentication-kubeconfig or the in-cluster config.
func (a *App) caPublisher() (*selfsigned.Publisher, error) {
	ref, err := selfsigned.ParseSecretRef(a.cfg.PublishCASecret)
	if err != nil {
		return nil, fmt.Errorf("publish-ca-secret: %w", err)
	}
	var cfg *rest.Config
	if path := a.cfg.AuthenticationKubeconfig; path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("publish-ca-secret: reaching kube-apiserver: %w", err)
	}
	cfg.UserAgent = "sunset"
	client, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("publish-ca-secret: %w", err)
	}
	return &selfsigned.Publisher{Keeper: a.certs, Secrets: client, Ref: ref, Logger: a.log, Every: publishCAEvery}, nil
}

// runCerts renews the certificate of cert-dir and keeps its CA published
// until ctx is done.
func (a *App) runCerts(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.certs.Run(ctx)
	}()
	if a.publisher != nil {
		a.publisher.Run(ctx)
	}
	<-done
	return nil
}
