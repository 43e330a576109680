// Package config is what `sunset serve` can be told, and its one job is
// to read and check it: every key with its flag, environment variable,
// default and help (Keys, Flags, Load, WriteReference for
// docs/configuration.md), and each section's Validate. It builds nothing:
// package app assembles a server from a valid Config.
//
// The sections of the inputs are declared by the input packages
// themselves (kafka.Config, fleet.Config, eks.Config, gke.Config), beside
// the code that reads them, and validate themselves; this package places
// them under their keys and calls their Validate. Every other section is
// declared here. So config imports the inputs' configuration types and
// the defaults of the packages whose limits it sets, and nothing that
// imports config (app, cli, cmd) is imported back.
package config

import (
	"slices"
	"time"

	"github.com/kube-sunset/sunset/access"
	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/ingest/webhook"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/systemusers"
)

// Config is everything `sunset serve` can be told. Each key is the same in
// the config file, as a flag (--data-dir, top-level keys only) and as an
// environment variable (SUNSET_DATA_DIR). A key's help (help.go, or the
// help tag of a section an input package owns) is its only description:
// the flags' usage and docs/configuration.md are made from it (see Keys),
// so the two cannot drift apart.
type Config struct {
	DataDir string `mapstructure:"data-dir"`
	Listen  string `mapstructure:"listen"`
	// TLS carries HTTP/2 too, which kube-apiserver's webhook client uses.
	TLSCertFile string `mapstructure:"tls-cert-file"`
	TLSKeyFile  string `mapstructure:"tls-key-file"`
	// Without tls-cert-file, Sunset off loopback serves a certificate of
	// its own (package selfsigned): a plain-HTTP listener is loopback only.
	CertDir         string   `mapstructure:"cert-dir" default:"<data-dir>/certs"`
	CertHosts       []string `mapstructure:"cert-hosts"`
	PublishCASecret string   `mapstructure:"publish-ca-secret"`
	TLSClientCAFile string   `mapstructure:"tls-client-ca-file"`

	WebhookTokenFile            string `mapstructure:"webhook-token-file"`
	WebhookTokenAuthFile        string `mapstructure:"webhook-token-auth-file"`
	WebhookAllowUnauthenticated bool   `mapstructure:"webhook-allow-unauthenticated"`

	// Who may read and reset the API and scrape /metrics (package access).
	// The names are those of the Kubernetes components' flags, so that
	// manifests written for metrics-server read the same.
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
	TokenAuthFile                   string   `mapstructure:"token-auth-file"`
	AuthorizationReadGroups         []string `mapstructure:"authorization-read-groups"`
	AuthorizationResetGroups        []string `mapstructure:"authorization-reset-groups"`
	AuthorizationAlwaysAllowPaths   []string `mapstructure:"authorization-always-allow-paths"`
	AllowUnauthenticated            bool     `mapstructure:"allow-unauthenticated"`

	DefaultCluster string `mapstructure:"default-cluster"`
	UserAgent      string `mapstructure:"user-agent"`
	Decoder        string `mapstructure:"decoder"`
	// The body limit's floor is a full batch of small events: see
	// minMaxBodyBytes.
	MaxBodyBytes            int64         `mapstructure:"max-body-bytes"`
	MaxInFlightBatches      int           `mapstructure:"max-inflight-batches"`
	MinBodyBytesPerSecond   int64         `mapstructure:"min-body-bytes-per-second"`
	Retention               time.Duration `mapstructure:"retention"`
	MaxClientsPerNodeHour   int           `mapstructure:"max-clients-per-node-hour"`
	MaxStoredClusters       int           `mapstructure:"max-stored-clusters"`
	MaxAPIServersPerCluster int           `mapstructure:"max-apiservers-per-cluster"`
	QueryCacheBytes         int64         `mapstructure:"query-cache-bytes"`
	ShutdownTimeout         time.Duration `mapstructure:"shutdown-timeout"`
	LogLevel                string        `mapstructure:"log-level"`
	LogFormat               string        `mapstructure:"log-format"`
	SystemUsers             []string      `mapstructure:"system-users"`

	// Zero is half of max-inflight-batches, whatever that is set to.
	MaxInFlightBatchesPerCredential int `mapstructure:"max-inflight-batches-per-credential" default:"half of max-inflight-batches"`

	Catalog CatalogConfig `mapstructure:"catalog"`
	// Clusters' names are lowercased by the config loader (viper), so the
	// names here are too.
	Clusters   map[string]ClusterConfig `mapstructure:"clusters"`
	Ingest     IngestConfig             `mapstructure:"ingest"`
	Kafka      KafkaConfig              `mapstructure:"kafka"`
	Metrics    MetricsConfig            `mapstructure:"metrics"`
	FieldRules []fieldrule.Rule         `mapstructure:"field-rules"`
	// Exemptions accept known calls for a while, so that the verdict can
	// say safe while a fix is on its way; they expire by design.
	Exemptions          []ExemptionConfig `mapstructure:"exemptions"`
	ExemptionsConfigMap string            `mapstructure:"exemptions-configmap"`
	Admission           AdmissionConfig   `mapstructure:"admission"`
	Scan                ScanConfig        `mapstructure:"scan"`
	Gate                GateConfig        `mapstructure:"gate"`

	// serviceAccountTokenFile is where a pod's service-account token is
	// looked for; empty means access.DefaultServiceAccountTokenFile. Not a
	// key: tests set it with WithServiceAccountTokenFile.
	serviceAccountTokenFile string
	// secretsInFile are the secretKeys that Load found set in the
	// config file, for WarnSecretsInFile.
	secretsInFile []string
}

// WithServiceAccountTokenFile returns c looking for a pod's
// service-account token at path instead of where kubelet mounts it, so
// that tests can say whether Sunset runs in a pod.
func (c Config) WithServiceAccountTokenFile(path string) Config {
	c.serviceAccountTokenFile = path
	return c
}

// DefaultQueryCacheBytes is the default of query-cache-bytes: room for
// a 30-day window of an API called by about 10,000 clients through 3
// apiservers, about 50 MiB.
const DefaultQueryCacheBytes = 64 << 20

// Values of the decoder key.
const (
	DecoderPrefilter = "prefilter"
	DecoderFull      = "full"
)

// Default is the zero-configuration setup: data in ./sunset-data,
// HTTP on 127.0.0.1:8080, open to local callers. Loopback, because the
// webhook then needs no credentials and reads no authentication: nothing off
// the host can reach it.
func Default() Config {
	return Config{
		DataDir:                 "./sunset-data",
		Listen:                  "127.0.0.1:8080",
		DefaultCluster:          "default",
		UserAgent:               string(classify.UserAgentShort),
		Decoder:                 DecoderPrefilter,
		MaxBodyBytes:            webhook.DefaultMaxBodyBytes,
		MaxInFlightBatches:      webhook.DefaultMaxInFlight,
		MinBodyBytesPerSecond:   webhook.DefaultMinBodyBytesPerSecond,
		Retention:               store.DefaultRetention,
		MaxClientsPerNodeHour:   store.DefaultMaxClients,
		MaxStoredClusters:       store.DefaultMaxClusters,
		QueryCacheBytes:         DefaultQueryCacheBytes,
		MaxAPIServersPerCluster: store.DefaultMaxNodes,
		ShutdownTimeout:         30 * time.Second,
		LogLevel:                "info",
		LogFormat:               "auto",
		SystemUsers:             slices.Clone(systemusers.DefaultSystemUsers),
		Metrics: MetricsConfig{Window: 24 * time.Hour, Grace: time.Hour, RemovalHorizon: 2, Refresh: 30 * time.Second,
			MaxSeries: cardinality.DefaultMaxSeries, MaxClusters: cardinality.DefaultMaxClusters},

		AuthorizationReadGroups:       []string{access.DefaultReadGroup},
		AuthorizationResetGroups:      []string{access.DefaultResetGroup},
		AuthorizationAlwaysAllowPaths: slices.Clone(access.DefaultAlwaysAllowPaths),
		Admission:                     defaultAdmission(),
		Gate:                          defaultGate(),
	}
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
	for _, e := range c.Ingest.EKS {
		names = append(names, e.Cluster)
	}
	for _, g := range c.Ingest.GKE {
		names = append(names, g.Cluster)
	}
	return names
}
