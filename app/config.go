package app

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/access"
	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/ingest/webhook"
	"github.com/kube-sunset/sunset/noise"
	"github.com/kube-sunset/sunset/store"
)

// Config is everything `sunset serve` can be told. Keys are the same in the
// config file, as flags (--data-dir) and as environment variables
// (SUNSET_DATA_DIR).
type Config struct {
	// DataDir is badger's directory.
	DataDir string `mapstructure:"data-dir"`
	// Listen is the HTTP address for the webhook, the API and /metrics.
	Listen string `mapstructure:"listen"`
	// TLSCertFile and TLSKeyFile turn on HTTPS (and HTTP/2, which
	// kube-apiserver uses). Both or neither.
	TLSCertFile string `mapstructure:"tls-cert-file"`
	TLSKeyFile  string `mapstructure:"tls-key-file"`
	// TLSClientCAFile makes the webhook require client certificates
	// signed by this CA; their common name names the node when the path
	// does not.
	TLSClientCAFile string `mapstructure:"tls-client-ca-file"`
	// WebhookTokenFile holds a bearer token the webhook requires, shared by
	// every apiserver.
	WebhookTokenFile string `mapstructure:"webhook-token-file"`
	// WebhookTokenAuthFile holds bearer tokens each bound to one apiserver,
	// in kube-apiserver's --token-auth-file CSV format.
	WebhookTokenAuthFile string `mapstructure:"webhook-token-auth-file"`
	// WebhookAllowUnauthenticated accepts webhook batches without
	// credentials on a listen address that is not loopback.
	WebhookAllowUnauthenticated bool `mapstructure:"webhook-allow-unauthenticated"`

	// Who may read and reset the API and scrape /metrics (see package
	// access and the README's "Access control"). The names are those of
	// the kube component flags.
	AuthenticationKubeconfig        string   `mapstructure:"authentication-kubeconfig"`
	AuthorizationKubeconfig         string   `mapstructure:"authorization-kubeconfig"`
	AuthenticationSkipLookup        bool     `mapstructure:"authentication-skip-lookup"`
	ClientCAFile                    string   `mapstructure:"client-ca-file"`
	RequestheaderClientCAFile       string   `mapstructure:"requestheader-client-ca-file"`
	RequestheaderAllowedNames       []string `mapstructure:"requestheader-allowed-names"`
	RequestheaderUsernameHeaders    []string `mapstructure:"requestheader-username-headers"`
	RequestheaderUIDHeaders         []string `mapstructure:"requestheader-uid-headers"`
	RequestheaderGroupHeaders       []string `mapstructure:"requestheader-group-headers"`
	RequestheaderExtraHeadersPrefix []string `mapstructure:"requestheader-extra-headers-prefix"`
	// TokenAuthFile holds reader tokens in kube-apiserver's
	// --token-auth-file CSV format.
	TokenAuthFile string `mapstructure:"token-auth-file"`
	// AuthorizationReadGroups and AuthorizationResetGroups decide without
	// a cluster (no authorization kubeconfig, not in a pod).
	AuthorizationReadGroups  []string `mapstructure:"authorization-read-groups"`
	AuthorizationResetGroups []string `mapstructure:"authorization-reset-groups"`
	// AuthorizationAlwaysAllowPaths are open to anyone.
	AuthorizationAlwaysAllowPaths []string `mapstructure:"authorization-always-allow-paths"`
	// AllowUnauthenticated lets anyone who reaches the port read, reset and
	// scrape, on any listen address. On loopback without authentication
	// flags that is the default.
	AllowUnauthenticated bool `mapstructure:"allow-unauthenticated"`
	// DefaultCluster names the cluster of webhook calls whose path has none.
	DefaultCluster string `mapstructure:"default-cluster"`
	// UserAgent is "short" (up to the first space, as OpenShift) or "full".
	UserAgent string `mapstructure:"user-agent"`
	// Decoder is "prefilter" (events that cannot count are set aside from
	// their bytes, undecoded) or "full" (every event decoded with
	// encoding/json, the reference the prefilter is tested against).
	Decoder string `mapstructure:"decoder"`
	// MaxBodyBytes is the largest webhook body accepted.
	MaxBodyBytes int64 `mapstructure:"max-body-bytes"`
	// MaxInFlightBatches is how many webhook batches are handled at once;
	// more get 429 with Retry-After.
	MaxInFlightBatches int `mapstructure:"max-inflight-batches"`
	// Retention is how long hourly counts and dedupe marks are kept.
	Retention time.Duration `mapstructure:"retention"`
	// MaxClientsPerNodeHour bounds the clients (username and user agent)
	// kept per API, apiserver node and hour; others count as "other".
	MaxClientsPerNodeHour int `mapstructure:"max-clients-per-node-hour"`
	// ShutdownTimeout bounds the graceful drain on SIGTERM.
	ShutdownTimeout time.Duration `mapstructure:"shutdown-timeout"`
	// LogLevel is trace, debug, info, warn or error.
	LogLevel string `mapstructure:"log-level"`
	// LogFormat is json, console, or auto (console on a terminal, else json).
	LogFormat string `mapstructure:"log-format"`
	// SystemUsers are usernames classified as system traffic; an entry
	// ending in "*" matches by prefix.
	SystemUsers []string `mapstructure:"system-users"`
	// Catalog adds API lifecycle entries (config file only).
	Catalog CatalogConfig `mapstructure:"catalog"`
	// Clusters holds per-cluster settings by cluster name (config file
	// only). Names are lowercased by the config loader.
	Clusters map[string]ClusterConfig `mapstructure:"clusters"`
	// Ingest configures inputs beside the webhook (config file only).
	Ingest IngestConfig `mapstructure:"ingest"`
	// Kafka configures consumption from Kafka topics.
	Kafka kafka.Config `mapstructure:"kafka"`
	// Metrics configures the deprecated-API gauges.
	Metrics MetricsConfig `mapstructure:"metrics"`
	// FieldRules add deprecated-field rules to the built-in one (config
	// file only).
	FieldRules []fieldrule.Rule `mapstructure:"field-rules"`
	// Admission configures the admission webhook counter.
	Admission AdmissionConfig `mapstructure:"admission"`
}

// AdmissionConfig is the admission key.
type AdmissionConfig struct {
	// Classes lists the resources of each class; a list replaces its
	// default.
	Classes AdmissionClasses `mapstructure:"classes"`
	// Webhooks always get their own metric labels, and name the
	// configuration of validating webhooks (config file only).
	Webhooks []admission.WebhookID `mapstructure:"webhooks"`
	// Metrics caps the other resources and webhooks with their own labels.
	Metrics AdmissionMetrics `mapstructure:"metrics"`
}

// AdmissionClasses is the admission.classes key.
type AdmissionClasses struct {
	Critical []string `mapstructure:"critical"`
	Security []string `mapstructure:"security"`
	Virtual  []string `mapstructure:"virtual"`
}

// AdmissionMetrics is the admission.metrics key.
type AdmissionMetrics struct {
	MaxResources int `mapstructure:"max-resources"`
	MaxWebhooks  int `mapstructure:"max-webhooks"`
}

// ClassMap returns the classes as admission.NewClasses takes them.
func (c AdmissionConfig) ClassMap() map[admission.Class][]string {
	return map[admission.Class][]string{admission.Critical: c.Classes.Critical, admission.Security: c.Classes.Security,
		admission.Virtual: c.Classes.Virtual}
}

// MetricsConfig is the metrics key.
type MetricsConfig struct {
	// Window is what sunset_deprecated_requests counts over.
	Window time.Duration `mapstructure:"window"`
	// Grace is how long a series shows 0 before it disappears.
	Grace time.Duration `mapstructure:"grace"`
	// RemovalHorizon is "within N releases" for the EUS alert.
	RemovalHorizon int `mapstructure:"removal-horizon"`
	// Refresh bounds how often the gauges rescan the store.
	Refresh time.Duration `mapstructure:"refresh"`
	// MaxSeries bounds the series of each metric whose labels come from
	// audit events.
	MaxSeries int `mapstructure:"max-series"`
	// MaxClusters bounds the cluster label values beyond the configured
	// clusters.
	MaxClusters int `mapstructure:"max-clusters"`
}

// IngestConfig is the ingest key.
type IngestConfig struct {
	// Files are audit log files to follow, like tail -F.
	Files []FollowFile `mapstructure:"files"`
}

// FollowFile is one audit log file to follow.
type FollowFile struct {
	Path    string `mapstructure:"path"`
	Node    string `mapstructure:"node"`
	Cluster string `mapstructure:"cluster"`
}

// CatalogConfig is the catalog key.
type CatalogConfig struct {
	// Extra entries, for CRDs or to override built-in ones.
	Extra []catalog.Entry `mapstructure:"extra"`
}

// ClusterConfig is one entry of the clusters key.
type ClusterConfig struct {
	// Version is the cluster's kube-apiserver release, e.g. "1.36" or
	// "v1.36.3". Optional.
	Version string `mapstructure:"version"`
}

// ClusterVersions returns the configured versions, parsed. Call it on a
// validated config.
func (c Config) ClusterVersions() map[string]catalog.Release {
	out := map[string]catalog.Release{}
	for name, cl := range c.Clusters {
		if r, err := catalog.ParseRelease(cl.Version); err == nil {
			out[name] = r
		}
	}
	return out
}

// Values of the decoder key.
const (
	DecoderPrefilter = "prefilter"
	DecoderFull      = "full"
)

// DefaultConfig is the zero-configuration setup: data in ./sunset-data,
// HTTP on 127.0.0.1:8080, open to local callers. Loopback, because the
// webhook then needs no credentials and reads no authentication: nothing off
// the host can reach it.
func DefaultConfig() Config {
	return Config{
		DataDir:               "./sunset-data",
		Listen:                "127.0.0.1:8080",
		DefaultCluster:        "default",
		UserAgent:             string(aggregate.UserAgentShort),
		Decoder:               DecoderPrefilter,
		MaxBodyBytes:          webhook.DefaultMaxBodyBytes,
		MaxInFlightBatches:    webhook.DefaultMaxInFlight,
		Retention:             store.DefaultRetention,
		MaxClientsPerNodeHour: store.DefaultMaxClients,
		ShutdownTimeout:       30 * time.Second,
		LogLevel:              "info",
		LogFormat:             "auto",
		SystemUsers:           slices.Clone(noise.DefaultSystemUsers),
		Metrics: MetricsConfig{Window: 24 * time.Hour, Grace: time.Hour, RemovalHorizon: 2, Refresh: 30 * time.Second,
			MaxSeries: cardinality.DefaultMaxSeries, MaxClusters: cardinality.DefaultMaxClusters},

		AuthorizationReadGroups:       []string{access.DefaultReadGroup},
		AuthorizationResetGroups:      []string{access.DefaultResetGroup},
		AuthorizationAlwaysAllowPaths: slices.Clone(access.DefaultAlwaysAllowPaths),
		Admission:                     defaultAdmission(),
	}
}

func defaultAdmission() AdmissionConfig {
	d := admission.DefaultClasses()
	return AdmissionConfig{
		Classes: AdmissionClasses{Critical: d[admission.Critical], Security: d[admission.Security], Virtual: d[admission.Virtual]},
		Metrics: AdmissionMetrics{MaxResources: admission.DefaultMaxResources, MaxWebhooks: admission.DefaultMaxWebhooks},
	}
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
	}
	o.Open = c.AllowUnauthenticated || (LoopbackListen(c.Listen) && !o.Authenticates())
	return o
}

// minMaxBodyBytes is the smallest body limit that still fits a full
// kube-apiserver batch of 400 small (Metadata level, ~1 KiB) events.
const minMaxBodyBytes = 1 << 20

// Validate checks every key and reports every problem at once, each naming
// its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.DataDir == "" {
		bad("data-dir", "must not be empty")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (for example :8080 or 127.0.0.1:8080)", c.Listen)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("tls-cert-file", "tls-cert-file and tls-key-file must be set together")
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		bad("tls-client-ca-file", "needs tls-cert-file and tls-key-file: client certificates only exist over TLS")
	}
	// In a fixed order (not a map's), so the same config always gives the
	// same message.
	for _, f := range []struct{ key, path string }{{"tls-cert-file", c.TLSCertFile}, {"tls-key-file", c.TLSKeyFile},
		{"tls-client-ca-file", c.TLSClientCAFile}, {"webhook-token-file", c.WebhookTokenFile}, {"webhook-token-auth-file", c.WebhookTokenAuthFile},
		{"authentication-kubeconfig", c.AuthenticationKubeconfig}, {"authorization-kubeconfig", c.AuthorizationKubeconfig},
		{"client-ca-file", c.ClientCAFile}, {"requestheader-client-ca-file", c.RequestheaderClientCAFile}, {"token-auth-file", c.TokenAuthFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			bad(f.key, "cannot read %s: %v", f.path, errors.Unwrap(err))
		}
	}
	for key, path := range map[string]string{"client-ca-file": c.ClientCAFile, "requestheader-client-ca-file": c.RequestheaderClientCAFile} {
		if path != "" && c.TLSCertFile == "" {
			bad(key, "needs tls-cert-file and tls-key-file: client certificates only exist over TLS")
		}
	}
	if c.DefaultCluster == "" {
		bad("default-cluster", "must not be empty")
	}
	if c.UserAgent != string(aggregate.UserAgentShort) && c.UserAgent != string(aggregate.UserAgentFull) {
		bad("user-agent", "%q is not one of short, full", c.UserAgent)
	}
	if c.Decoder != DecoderPrefilter && c.Decoder != DecoderFull {
		bad("decoder", "%q is not one of %s, %s", c.Decoder, DecoderPrefilter, DecoderFull)
	}
	if c.MaxBodyBytes < minMaxBodyBytes {
		bad("max-body-bytes", "%d is below the minimum of %d; kube-apiserver sends up to 400 events per batch", c.MaxBodyBytes, minMaxBodyBytes)
	}
	if c.MaxInFlightBatches < 1 {
		bad("max-inflight-batches", "must be at least 1, got %d", c.MaxInFlightBatches)
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
	if _, err := catalog.New(c.Catalog.Extra); err != nil {
		errs = append(errs, err)
	}
	if c.Metrics.Window < time.Hour || c.Metrics.Window > c.Retention {
		bad("metrics.window", "%s must be from 1h to the retention (%s)", c.Metrics.Window, c.Retention)
	}
	if c.Metrics.Grace < 0 {
		bad("metrics.grace", "must not be negative, got %s", c.Metrics.Grace)
	}
	if c.Metrics.RemovalHorizon < 1 {
		bad("metrics.removal-horizon", "must be at least 1 release, got %d", c.Metrics.RemovalHorizon)
	}
	if c.Metrics.Refresh < 0 {
		bad("metrics.refresh", "must not be negative, got %s", c.Metrics.Refresh)
	}
	if c.Metrics.MaxSeries < 1 {
		bad("metrics.max-series", "must be at least 1, got %d", c.Metrics.MaxSeries)
	}
	if c.Metrics.MaxClusters < 1 {
		bad("metrics.max-clusters", "must be at least 1, got %d", c.Metrics.MaxClusters)
	}
	if c.MaxClientsPerNodeHour < 1 {
		bad("max-clients-per-node-hour", "must be at least 1, got %d", c.MaxClientsPerNodeHour)
	}
	if _, err := fieldrule.New(c.FieldRules); err != nil {
		errs = append(errs, err)
	}
	if _, err := admission.NewClasses(c.Admission.ClassMap()); err != nil {
		errs = append(errs, err)
	}
	for i, w := range c.Admission.Webhooks {
		if w.Webhook == "" || len(w.Webhook) > admission.MaxNameBytes || len(w.Configuration) > admission.MaxNameBytes {
			bad(fmt.Sprintf("admission.webhooks[%d].webhook", i), "must name a webhook (at most %d bytes), as in its configuration's webhooks[].name", admission.MaxNameBytes)
		}
	}
	if c.Admission.Metrics.MaxResources < 1 {
		bad("admission.metrics.max-resources", "must be at least 1, got %d", c.Admission.Metrics.MaxResources)
	}
	if c.Admission.Metrics.MaxWebhooks < 1 {
		bad("admission.metrics.max-webhooks", "must be at least 1, got %d", c.Admission.Metrics.MaxWebhooks)
	}
	if err := c.Kafka.WithDefaults().Validate(); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for i, f := range c.Ingest.Files {
		key := fmt.Sprintf("ingest.files[%d]", i)
		switch {
		case f.Path == "":
			bad(key+".path", "must not be empty")
		case seen[f.Path]:
			bad(key+".path", "%s is followed twice", f.Path)
		}
		seen[f.Path] = true
		if f.Node == "" {
			bad(key+".node", "must name the apiserver that writes %s", f.Path)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Clusters)) {
		if v := c.Clusters[name].Version; v != "" {
			if _, err := catalog.ParseRelease(v); err != nil {
				bad("clusters."+name+".version", "%v", err)
			}
		}
	}
	return errors.Join(errs...)
}

// ValidateListen checks what only serving needs: beyond loopback, the
// webhook has credentials or was told to go without, and readers must
// authenticate or anyone was allowed. Readers of a data
// directory that pass the server's config file need not repeat the
// server's flags.
func (c Config) ValidateListen() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return nil // Validate reports it
	}
	var errs []error
	if !c.WebhookAuthenticated() && !c.WebhookAllowUnauthenticated && !LoopbackListen(c.Listen) {
		errs = append(errs, fmt.Errorf("listen: %s is not a loopback address and the webhook has no credentials, so anyone who reaches it could add counts: "+
			"set webhook-token-auth-file (a token per apiserver), webhook-token-file or tls-client-ca-file, "+
			"or set webhook-allow-unauthenticated=true to accept that", c.Listen))
	}
	if !LoopbackListen(c.Listen) && !c.AllowUnauthenticated && !c.Access().Authenticates() {
		errs = append(errs, fmt.Errorf("listen: %s is reachable from other machines, but nothing authenticates API readers: "+
			"set authentication-kubeconfig and authorization-kubeconfig (in a pod the in-cluster config is used), "+
			"token-auth-file or client-ca-file, or set allow-unauthenticated=true to let anyone who reaches the port read and reset", c.Listen))
	}
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

// ClusterNames are the clusters the configuration names: default-cluster,
// the clusters key and followed files. Their names are always kept as
// metric labels.
func (c Config) ClusterNames() []string {
	names := []string{c.DefaultCluster}
	for name := range c.Clusters {
		names = append(names, name)
	}
	for _, f := range c.Ingest.Files {
		names = append(names, f.Cluster)
	}
	return names
}
