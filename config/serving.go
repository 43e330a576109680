package config

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-sunset/sunset/access"
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

// ValidateListen checks what only serving needs: beyond loopback, the
// webhook has credentials or was told to go without and readers must
// authenticate or anyone was allowed; a CA to publish has a cluster to go
// to. Readers of a data directory that pass the server's config file need
// not repeat the server's flags.
func (c Config) ValidateListen() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return nil // Validate reports it
	}
	var errs []error
	if c.PublishCASecret != "" && c.AuthenticationKubeconfig == "" && !c.Access().InCluster() {
		errs = append(errs, fmt.Errorf("publish-ca-secret: there is no cluster to publish %s in: run in a pod with a service-account token, "+
			"set authentication-kubeconfig, or leave publish-ca-secret empty and hand out ca.crt of %s yourself", c.PublishCASecret, c.CertDirPath()))
	}
	if LoopbackListen(c.Listen) {
		return errors.Join(errs...)
	}
	if !c.WebhookAuthenticated() && !c.WebhookAllowUnauthenticated {
		errs = append(errs, fmt.Errorf("listen: %s is not a loopback address and the webhook has no credentials, so anyone who reaches it could add counts: "+
			"set webhook-token-auth-file (a token per apiserver), webhook-token-file or tls-client-ca-file, "+
			"or set webhook-allow-unauthenticated=true to accept that", c.Listen))
	}
	acc := c.Access()
	if !c.AllowUnauthenticated && !acc.Authenticates() {
		errs = append(errs, fmt.Errorf("listen: %s is reachable from other machines, but nothing authenticates API readers: "+
			"set authentication-kubeconfig and authorization-kubeconfig (in a pod the in-cluster config is used), "+
			"token-auth-file or client-ca-file, or set allow-unauthenticated=true to let anyone who reaches the port read and reset", c.Listen))
	}
	// Bearer tokens need no check of their own: off loopback, Sunset
	// serves HTTPS only (ServesTLS).
	return errors.Join(errs...)
}

// WebhookAuthenticated reports whether the webhook demands credentials.
func (c Config) WebhookAuthenticated() bool {
	return c.WebhookTokenFile != "" || c.WebhookTokenAuthFile != "" || c.TLSClientCAFile != ""
}

// LoopbackListen reports whether a listen address (host:port) accepts
// connections from this host only: localhost or a loopback IP. An empty
// host listens on every address.
func LoopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LocalURL is where a client on this host reaches a server that runs with
// this config: its listen port, on localhost when it listens on every
// address, and over HTTPS when it serves TLS, as it must beyond loopback.
func (c Config) LocalURL() string {
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	scheme := "http"
	if c.TLSCertFile != "" || !LoopbackListen(c.Listen) {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// Access is the access.Options the config describes.
func (c Config) Access() access.Options {
	o := access.Options{
		AuthenticationKubeconfig: c.AuthenticationKubeconfig,
		AuthorizationKubeconfig:  c.AuthorizationKubeconfig,
		SkipLookup:               c.AuthenticationSkipLookup,
		ClientCAFile:             c.ClientCAFile,
		RequestHeader: access.RequestHeader{
			ClientCAFile: c.RequestheaderClientCAFile, AllowedNames: c.RequestheaderAllowedNames,
			UsernameHeaders: c.RequestheaderUsernameHeaders, UIDHeaders: c.RequestheaderUIDHeaders,
			GroupHeaders: c.RequestheaderGroupHeaders, ExtraHeaderPrefixes: c.RequestheaderExtraHeadersPrefix,
		},
		TokenAuthFile:    c.TokenAuthFile,
		ReadGroups:       c.AuthorizationReadGroups,
		ResetGroups:      c.AuthorizationResetGroups,
		AlwaysAllowPaths: c.AuthorizationAlwaysAllowPaths,

		ServiceAccountTokenFile: c.serviceAccountTokenFile,
	}
	o.Open = c.AllowUnauthenticated || (LoopbackListen(c.Listen) && !o.Authenticates())
	return o
}
