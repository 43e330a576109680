package config

import (
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/fieldrule"
)

// minMaxBodyBytes is the smallest body limit that still fits a full
// kube-apiserver batch of 400 small (Metadata level, ~1 KiB) events.
const minMaxBodyBytes = 1 << 20

// Validate checks every key and reports every problem at once, each naming
// its key: the top-level keys here, each section through its own Validate.
func (c Config) Validate() error {
	var errs []error
	bad := badFunc(&errs)
	c.validateServing(bad)
	errs = append(errs, c.Gate.Validate(c.Retention), c.Scan.Validate())
	if _, err := ParseExemptions(c.Exemptions); err != nil {
		bad("exemptions", "%v", err)
	}
	if c.ExemptionsConfigMap != "" {
		if _, _, err := ParseConfigMapRef(c.ExemptionsConfigMap); err != nil {
			bad("exemptions-configmap", "%v", err)
		}
	}
	c.validateFiles(bad)
	c.validateCounting(bad)
	c.validateLimits(bad)
	errs = append(errs, c.Catalog.Validate(), c.Metrics.Validate(c.Retention))
	c.validateStoreLimits(bad)
	if _, err := fieldrule.New(c.FieldRules); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Admission.Validate(), c.Kafka.WithDefaults().Validate(), c.Ingest.Validate(), validateClusters(c.Clusters))
	return errors.Join(errs...)
}

// validateServing checks where and how Sunset listens.
func (c Config) validateServing(bad func(key, format string, args ...any)) {
	if c.DataDir == "" {
		bad("data-dir", "must not be empty")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (for example :8080 or 127.0.0.1:8080)", c.Listen)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("tls-cert-file", "tls-cert-file and tls-key-file must be set together")
	}
	if c.TLSClientCAFile != "" && !c.ServesTLS() {
		bad("tls-client-ca-file", "needs tls-cert-file and tls-key-file: client certificates only exist over TLS")
	}
	c.validateCertDir(bad)
}

// validateFiles checks that the files the keys name can be read, and that
// the client CAs have TLS to check certificates in.
func (c Config) validateFiles(bad func(key, format string, args ...any)) {
	// Slices, not maps, so that the same config always gives the same
	// message in the same order.
	for _, f := range []struct{ key, path string }{{"tls-cert-file", c.TLSCertFile}, {"tls-key-file", c.TLSKeyFile},
		{"tls-client-ca-file", c.TLSClientCAFile}, {"webhook-token-file", c.WebhookTokenFile},
		{"webhook-token-auth-file", c.WebhookTokenAuthFile},
		{"authentication-kubeconfig", c.AuthenticationKubeconfig}, {"authorization-kubeconfig", c.AuthorizationKubeconfig},
		{"client-ca-file", c.ClientCAFile}, {"requestheader-client-ca-file", c.RequestheaderClientCAFile},
		{"token-auth-file", c.TokenAuthFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			bad(f.key, "cannot read %s: %v", f.path, errors.Unwrap(err))
		}
	}
	for _, f := range []struct{ key, path string }{{"client-ca-file", c.ClientCAFile},
		{"requestheader-client-ca-file", c.RequestheaderClientCAFile}} {
		if f.path != "" && !c.ServesTLS() {
			bad(f.key, "needs tls-cert-file and tls-key-file: client certificates only exist over TLS")
		}
	}
}

// validateCounting checks how events are read and named.
func (c Config) validateCounting(bad func(key, format string, args ...any)) {
	if c.DefaultCluster == "" {
		bad("default-cluster", "must not be empty")
	}
	if c.UserAgent != string(classify.UserAgentShort) && c.UserAgent != string(classify.UserAgentFull) {
		bad("user-agent", "%q is not one of short, full", c.UserAgent)
	}
	if c.Decoder != DecoderPrefilter && c.Decoder != DecoderFull {
		bad("decoder", "%q is not one of %s, %s", c.Decoder, DecoderPrefilter, DecoderFull)
	}
}

// validateLimits checks the webhook's bounds, how long counts are kept,
// the shutdown and the logs.
func (c Config) validateLimits(bad func(key, format string, args ...any)) {
	if c.MaxBodyBytes < minMaxBodyBytes {
		bad("max-body-bytes", "%d is below the minimum of %d; kube-apiserver sends up to 400 events per batch",
			c.MaxBodyBytes, minMaxBodyBytes)
	}
	if c.MaxInFlightBatches < 1 {
		bad("max-inflight-batches", "must be at least 1, got %d", c.MaxInFlightBatches)
	}
	if c.MaxInFlightBatchesPerCredential < 0 || c.MaxInFlightBatchesPerCredential > c.MaxInFlightBatches {
		bad("max-inflight-batches-per-credential", "must be from 0 (half of max-inflight-batches) to max-inflight-batches (%d), got %d",
			c.MaxInFlightBatches, c.MaxInFlightBatchesPerCredential)
	}
	if c.MinBodyBytesPerSecond < 1 && c.MinBodyBytesPerSecond != -1 {
		bad("min-body-bytes-per-second", "must be at least 1, or -1 for no minimum, got %d", c.MinBodyBytesPerSecond)
	}
	if c.Retention < 24*time.Hour {
		bad("retention", "%s is shorter than the 24h the API reports", c.Retention)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	if !slices.Contains([]string{"trace", "debug", "info", "warn", "error"}, strings.ToLower(c.LogLevel)) {
		bad("log-level", "%q is not one of trace, debug, info, warn, error", c.LogLevel)
	}
	if !slices.Contains([]string{"auto", "json", "console"}, c.LogFormat) {
		bad("log-format", "%q is not one of auto, json, console", c.LogFormat)
	}
}

// validateStoreLimits checks what the store keeps of each cluster.
func (c Config) validateStoreLimits(bad func(key, format string, args ...any)) {
	if c.MaxClientsPerNodeHour < 1 {
		bad("max-clients-per-node-hour", "must be at least 1, got %d", c.MaxClientsPerNodeHour)
	}
	if c.MaxStoredClusters < 1 {
		bad("max-stored-clusters", "must be at least 1, got %d", c.MaxStoredClusters)
	}
	if c.MaxAPIServersPerCluster < 1 {
		bad("max-apiservers-per-cluster", "must be at least 1, got %d", c.MaxAPIServersPerCluster)
	}
	if c.QueryCacheBytes < 0 {
		bad("query-cache-bytes", "must not be negative (0 keeps nothing), got %d", c.QueryCacheBytes)
	}
}
