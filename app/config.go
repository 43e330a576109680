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

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-sunset/sunset/access"
	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/ingest/eks"
	"github.com/kube-sunset/sunset/ingest/gke"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/ingest/webhook"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/systemusers"
)

// Config is everything `sunset serve` can be told. Each key is the same in
// the config file, as a flag (--data-dir, top-level keys only) and as an
// environment variable (SUNSET_DATA_DIR). A key's help tag is its only
// description: the flags' usage and docs/configuration.md are made from it
// (see Keys), so the two cannot drift apart.
type Config struct {
	DataDir string `mapstructure:"data-dir" help:"Badger's data directory. One server per directory: a second process that opens it is refused and pointed at --server."`
	Listen  string `mapstructure:"listen" help:"Address of the webhook, the API, /metrics and the health endpoints. :8080 listens on every address; beyond loopback, Sunset serves HTTPS only (tls-cert-file, else a certificate of its own in cert-dir), readers must authenticate (or allow-unauthenticated be set) and the webhook needs credentials (or webhook-allow-unauthenticated), else Sunset refuses to start."`
	// TLS carries HTTP/2 too, which kube-apiserver's webhook client uses.
	TLSCertFile string `mapstructure:"tls-cert-file" help:"Serve HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate. Set together with tls-key-file."`
	TLSKeyFile  string `mapstructure:"tls-key-file" help:"The PEM private key of tls-cert-file."`
	// Without tls-cert-file, Sunset off loopback serves a certificate of
	// its own (package selfsigned): a plain-HTTP listener is loopback only.
	CertDir         string   `mapstructure:"cert-dir" default:"<data-dir>/certs" help:"Where Sunset keeps the CA and serving certificate it makes for itself when it serves HTTPS without tls-cert-file: ca.crt, ca.key, tls.crt and tls.key. It does so on any listen address that is not loopback, and on loopback too when cert-dir is set. Kept across restarts; the serving certificate (a year) is renewed 90 days before it ends under the same CA (ten years). Empty means <data-dir>/certs."`
	CertHosts       []string `mapstructure:"cert-hosts" help:"DNS names and IP addresses the certificate in cert-dir is for, beside localhost, 127.0.0.1 and ::1: the Service's names (sunset.sunset.svc) and the address kube-apiserver posts to. A kept certificate that lacks one is made again."`
	PublishCASecret string   `mapstructure:"publish-ca-secret" help:"Keep the CA of cert-dir in this Secret (namespace/name), under ca.crt beside the CAs of the other replicas, for the APIService's caBundle, Prometheus and kube-apiserver's webhook kubeconfig to trust. Written through authentication-kubeconfig, else the in-cluster config; needs get, create and update on that Secret."`
	TLSClientCAFile string   `mapstructure:"tls-client-ca-file" help:"The webhook requires a client certificate signed by this CA (401 otherwise), issued as O=<cluster>, CN=<node>. Its common name names the node when the path has none; a node in the path must be its common name or a subject alternative name, and the cluster the path names one of its organizations (a certificate without O may post only to paths without a cluster), and default-cluster, for a path without one, one of its organizations where it has any (403 otherwise). Needs TLS. A reader's certificate from another CA never counts as the webhook's."`

	WebhookTokenFile            string `mapstructure:"webhook-token-file" help:"The webhook requires Authorization: Bearer <the file's contents> (401 otherwise), from any apiserver."`
	WebhookTokenAuthFile        string `mapstructure:"webhook-token-auth-file" help:"The webhook requires a bearer token from this CSV file, token,user,uid[,\"groups\"] as kube-apiserver's --token-auth-file, where user is <cluster>/<node> or <node>: each token posts only as that apiserver (401 for an unknown token, 403 for another apiserver's path)."`
	WebhookAllowUnauthenticated bool   `mapstructure:"webhook-allow-unauthenticated" help:"Accept webhook batches without credentials on a listen address that is not loopback (a warning is logged at start). Without it, and without any of the three webhook credential keys, such a listen address is an error."`

	// Who may read and reset the API and scrape /metrics (package access).
	// The names are those of the Kubernetes components' flags, so that
	// manifests written for metrics-server read the same.
	AuthenticationKubeconfig        string   `mapstructure:"authentication-kubeconfig" help:"kube-apiserver that checks readers' bearer tokens (TokenReview) and whose kube-system/extension-apiserver-authentication ConfigMap gives client-ca-file and the requestheader-* settings unless they are set here. In a pod the in-cluster config is the default."`
	AuthorizationKubeconfig         string   `mapstructure:"authorization-kubeconfig" help:"kube-apiserver that decides reads and resets (SubjectAccessReview). In a pod the in-cluster config is the default."`
	AuthenticationSkipLookup        bool     `mapstructure:"authentication-skip-lookup" help:"Do not read client-ca-file and requestheader-* from the extension-apiserver-authentication ConfigMap."`
	ClientCAFile                    string   `mapstructure:"client-ca-file" help:"Readers' client certificates signed by this CA authenticate: the common name is the user, the organizations the groups. Needs TLS."`
	RequestheaderClientCAFile       string   `mapstructure:"requestheader-client-ca-file" help:"Trust the X-Remote-* headers only on connections with a client certificate from this CA: kube-apiserver's aggregator. Needs TLS."`
	RequestheaderAllowedNames       []string `mapstructure:"requestheader-allowed-names" help:"Common names of front-proxy client certificates to trust; empty means any that requestheader-client-ca-file signed."`
	RequestheaderUsernameHeaders    []string `mapstructure:"requestheader-username-headers" help:"Front-proxy headers that carry the user name; empty means X-Remote-User."`
	RequestheaderUIDHeaders         []string `mapstructure:"requestheader-uid-headers" help:"Front-proxy headers that carry the user's UID."`
	RequestheaderGroupHeaders       []string `mapstructure:"requestheader-group-headers" help:"Front-proxy headers that carry the groups; empty means X-Remote-Group."`
	RequestheaderExtraHeadersPrefix []string `mapstructure:"requestheader-extra-headers-prefix" help:"Front-proxy header prefixes of the user's extras; empty means X-Remote-Extra-."`
	TokenAuthFile                   string   `mapstructure:"token-auth-file" help:"Readers' static tokens in kube-apiserver's --token-auth-file format, one per line: token,user,uid,\"group1,group2\"."`
	AuthorizationReadGroups         []string `mapstructure:"authorization-read-groups" help:"Without a cluster to ask (no authorization-kubeconfig, not in a pod): groups that may read the API and /metrics."`
	AuthorizationResetGroups        []string `mapstructure:"authorization-reset-groups" help:"Without a cluster to ask: groups that may also reset counts (DELETE)."`
	AuthorizationAlwaysAllowPaths   []string `mapstructure:"authorization-always-allow-paths" help:"Paths anyone may GET, for probes; add /metrics to leave it open."`
	AllowUnauthenticated            bool     `mapstructure:"allow-unauthenticated" help:"Let anyone who reaches the port read, reset and scrape, on any listen address (a warning is logged at start). On loopback without authentication keys that is the default."`

	DefaultCluster string `mapstructure:"default-cluster" help:"Cluster of webhook paths, Kafka messages and files that name none."`
	UserAgent      string `mapstructure:"user-agent" help:"short keeps the user agent up to its first space, as OpenShift does; full keeps it whole."`
	Decoder        string `mapstructure:"decoder" help:"prefilter sets aside, from its bytes and undecoded, every event that cannot count; full decodes every event with encoding/json. Both count exactly the same; full is the reference the prefilter is tested against, and slower."`
	// The body limit's floor is a full batch of small events: see
	// minMaxBodyBytes.
	MaxBodyBytes            int64         `mapstructure:"max-body-bytes" help:"Largest webhook body accepted, in bytes; larger ones get 413. The default fits 400 events of 160 KiB. At least 1 MiB."`
	MaxInFlightBatches      int           `mapstructure:"max-inflight-batches" help:"Webhook batches handled at once; more get 429 with Retry-After: 1. A batch takes a slot only once its body has started."`
	MinBodyBytesPerSecond   int64         `mapstructure:"min-body-bytes-per-second" help:"Slowest average rate, in bytes per second, at which a webhook body must arrive once it has started (after 2s of slack); a slower sender gets 408 and gives its batch slot back, so that slow senders cannot hold every slot. A body that has not started 10s after its headers gets 408 too, having held no slot. -1 turns the rate off."`
	Retention               time.Duration `mapstructure:"retention" help:"How long hourly counts and dedupe marks are kept. At least 24h."`
	MaxClientsPerNodeHour   int           `mapstructure:"max-clients-per-node-hour" help:"Clients (user name and user agent) an API keeps per apiserver node and hour; further ones are counted as the client \"other\"."`
	MaxStoredClusters       int           `mapstructure:"max-stored-clusters" help:"Clusters the store keeps counts of within the retention period; requests of further clusters are counted under cluster \"other\", so that a sender inventing cluster names cannot grow the store without end."`
	MaxAPIServersPerCluster int           `mapstructure:"max-apiservers-per-cluster" help:"Apiservers per cluster the store keeps counts of within the retention period; requests of further ones are counted under node \"other\"."`
	ShutdownTimeout         time.Duration `mapstructure:"shutdown-timeout" help:"How long SIGTERM waits for the batches in flight."`
	LogLevel                string        `mapstructure:"log-level" help:"trace, debug, info, warn or error."`
	LogFormat               string        `mapstructure:"log-format" help:"json, console, or auto (console on a terminal, else json)."`
	SystemUsers             []string      `mapstructure:"system-users" help:"User names classified as system traffic; an entry ending in * matches a prefix. A list replaces the defaults."`

	// Zero is half of max-inflight-batches, whatever that is set to.
	MaxInFlightBatchesPerCredential int `mapstructure:"max-inflight-batches-per-credential" default:"half of max-inflight-batches" help:"Webhook batch slots one credential may hold at once, so that one busy or hostile apiserver cannot take them all: past it, its batches get 429 with Retry-After: 1 while others still get slots. A bound token counts for its apiserver, a client certificate for its subject; with webhook-token-file alone, or no credentials, each apiserver the path names has its own share. 0 means half of max-inflight-batches; max-inflight-batches turns the bound off."`

	Catalog CatalogConfig `mapstructure:"catalog"`
	// Clusters' names are lowercased by the config loader (viper), so the
	// names here are too.
	Clusters   map[string]ClusterConfig `mapstructure:"clusters"`
	Ingest     IngestConfig             `mapstructure:"ingest"`
	Kafka      kafka.Config             `mapstructure:"kafka"`
	Metrics    MetricsConfig            `mapstructure:"metrics"`
	FieldRules []fieldrule.Rule         `mapstructure:"field-rules" help:"Deprecated-field rules beside the built-in one: name, group, version, resource, optional subresource, verbs, field, deprecatedIn, removedIn, message. See counting.md#deprecated-fields."`
	// Exemptions accept known calls for a while, so that the verdict can
	// say safe while a fix is on its way; they expire by design.
	Exemptions          []ExemptionConfig `mapstructure:"exemptions" help:"Calls the upgrade verdict accepts until they expire: each with api (the APIRequestCount name, e.g. cronjobs.v1beta1.batch), user and/or userAgent (a trailing * matches a prefix; with neither, every call to the API), reason (required) and expires (required: an RFC 3339 time, or a date meaning 00:00 UTC of it). See cli.md#exemptions."`
	ExemptionsConfigMap string            `mapstructure:"exemptions-configmap" help:"A ConfigMap (namespace/name) whose key exemptions holds more exemptions, in the same YAML shape, read every minute through the in-cluster config; a bad one keeps the last good list and says so in the log and /-/ready?verbose. Needs get on that ConfigMap."`
	Admission           AdmissionConfig   `mapstructure:"admission"`
	Scan                ScanConfig        `mapstructure:"scan"`
	Gate                GateConfig        `mapstructure:"gate"`

	// serviceAccountTokenFile is where a pod's service-account token is
	// looked for; empty means access.DefaultServiceAccountTokenFile. Not a
	// key: tests set it with WithServiceAccountTokenFile.
	serviceAccountTokenFile string
	// secretsInFile are the secretKeys that LoadConfig found set in the
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

// AdmissionConfig is the admission key.
type AdmissionConfig struct {
	Classes  AdmissionClasses      `mapstructure:"classes"`
	Webhooks []admission.WebhookID `mapstructure:"webhooks" help:"Webhooks (configuration, webhook) that always get their own metric labels, and that name the configuration of validating webhooks."`
	Metrics  AdmissionMetrics      `mapstructure:"metrics"`
}

// AdmissionClasses is the admission.classes key: a list replaces its
// default.
type AdmissionClasses struct {
	Critical []string `mapstructure:"critical" help:"Resources whose webhooks are scalability and stability bottlenecks: a slow webhook there slows the cluster. A list replaces the default."`
	Security []string `mapstructure:"security" help:"Resources that hold or grant credentials: every webhook on them sees secrets and tokens in plain text. A list replaces the default."`
	Virtual  []string `mapstructure:"virtual" help:"Resources that are not stored (reviews, bindings): a webhook on them is almost always a mistake. A list replaces the default."`
}

// AdmissionMetrics is the admission.metrics key.
type AdmissionMetrics struct {
	MaxResources int `mapstructure:"max-resources" help:"Resources with their own labels on the admission metrics beyond the classes' own; the rest are other."`
	MaxWebhooks  int `mapstructure:"max-webhooks" help:"Webhooks with their own labels on the admission metrics beyond admission.webhooks; the rest are other."`
}

// ClassMap returns the classes as admission.NewClasses takes them.
func (c AdmissionConfig) ClassMap() map[admission.Class][]string {
	return map[admission.Class][]string{admission.Critical: c.Classes.Critical, admission.Security: c.Classes.Security,
		admission.Virtual: c.Classes.Virtual}
}

// MetricsConfig is the metrics key.
type MetricsConfig struct {
	Window         time.Duration `mapstructure:"window" help:"What sunset_deprecated_requests counts over, from 1h to the retention."`
	Grace          time.Duration `mapstructure:"grace" help:"How long a series shows 0 before it disappears, so that alerts resolve rather than vanish."`
	RemovalHorizon int           `mapstructure:"removal-horizon" help:"Releases ahead the SunsetAPIRemovedWithinHorizonInUse alert looks, exported as sunset_removal_horizon_releases."`
	Refresh        time.Duration `mapstructure:"refresh" help:"How often, at most, the gauges rescan the store."`
	MaxSeries      int           `mapstructure:"max-series" help:"Series of each metric whose labels come from audit events; beyond it label sets fold into other."`
	MaxClusters    int           `mapstructure:"max-clusters" help:"Cluster label values beyond the configured clusters; later clusters are other."`
}

// IngestConfig is the ingest key.
type IngestConfig struct {
	Files []FollowFile `mapstructure:"files" help:"Audit log files to follow like tail -F. See inputs/files.md."`
	EKS   []eks.Config `mapstructure:"eks" help:"EKS clusters whose audit logs are read from CloudWatch Logs, one entry each. AWS credentials come from the SDK's default chain (IRSA, EKS Pod Identity, the environment), never from this file. See inputs/managed.md#eks."`
	GKE   []gke.Config `mapstructure:"gke" help:"GKE clusters whose audit logs a Log Router sink sends to Pub/Sub, one subscription each. Google credentials come from Application Default Credentials (Workload Identity), never from this file. See inputs/managed.md#gke."`
}

// FollowFile is one audit log file to follow.
type FollowFile struct {
	Path    string `mapstructure:"path" help:"The audit log file kube-apiserver writes (--audit-log-path)."`
	Node    string `mapstructure:"node" help:"The apiserver that writes it, as the apiserver label of its counts."`
	Cluster string `mapstructure:"cluster" help:"The cluster its counts go to; default-cluster when empty."`
}

// CatalogConfig is the catalog key.
type CatalogConfig struct {
	Extra []catalog.Entry `mapstructure:"extra" help:"API lifecycle entries beside the built-in catalog, for CRDs or to override a built-in entry. See counting.md#the-api-lifecycle-catalog."`
}

// ClusterConfig is one entry of the clusters key.
type ClusterConfig struct {
	Version string `mapstructure:"version" help:"The cluster's kube-apiserver release, 1.36 or v1.36.3, for the verdict of sunset check and the page. Cluster names here are lowercase."`
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
		DataDir:                 "./sunset-data",
		Listen:                  "127.0.0.1:8080",
		DefaultCluster:          "default",
		UserAgent:               string(aggregate.UserAgentShort),
		Decoder:                 DecoderPrefilter,
		MaxBodyBytes:            webhook.DefaultMaxBodyBytes,
		MaxInFlightBatches:      webhook.DefaultMaxInFlight,
		MinBodyBytesPerSecond:   webhook.DefaultMinBodyBytesPerSecond,
		Retention:               store.DefaultRetention,
		MaxClientsPerNodeHour:   store.DefaultMaxClients,
		MaxStoredClusters:       store.DefaultMaxClusters,
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

		ServiceAccountTokenFile: c.serviceAccountTokenFile,
	}
	o.Open = c.AllowUnauthenticated || (LoopbackListen(c.Listen) && !o.Authenticates())
	return o
}

// minMaxBodyBytes is the smallest body limit that still fits a full
// kube-apiserver batch of 400 small (Metadata level, ~1 KiB) events.
const minMaxBodyBytes = 1 << 20

// ScanConfig is the server's scan of its own cluster.
type ScanConfig struct {
	Interval  time.Duration `mapstructure:"interval" help:"How often serve scans its own cluster (Helm releases, CRD stored versions, APIServices) with its service account, or KUBECONFIG outside a pod, for the upgrade checks and the sunset_scan_* metrics; 0 turns the scan off, else at least 1m. For a single binary: in Kubernetes, use scan.configMap, so that the pod taking the webhook reads no Secrets. See scanning.md#in-the-server."`
	ConfigMap string        `mapstructure:"configMap" help:"namespace/name of the ConfigMap that sunset publish-scan, run in a workload of its own with the scan's permissions, writes the cluster scan into; serve reads it every minute, needing only get on that ConfigMap, instead of scanning (not with scan.interval). See scanning.md#in-the-server."`
}

// configMapPoll is how often serve reads the ConfigMap of scan.configMap:
// one get of one object.
const configMapPoll = time.Minute

// ParseConfigMapRef reads scan.configMap's namespace/name.
func ParseConfigMapRef(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", fmt.Errorf("%q is not namespace/name, as sunset/sunset-cluster-scan", s)
	}
	return namespace, name, nil
}

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
	if c.TLSClientCAFile != "" && !c.ServesTLS() {
		bad("tls-client-ca-file", "needs tls-cert-file and tls-key-file: client certificates only exist over TLS")
	}
	c.validateCertDir(bad)
	c.validateGate(bad)
	if c.Scan.Interval != 0 && c.Scan.Interval < time.Minute {
		bad("scan.interval", "%s is shorter than 1m; a cluster scan lists every Helm release record", c.Scan.Interval)
	}
	if _, err := ParseExemptions(c.Exemptions); err != nil {
		bad("exemptions", "%v", err)
	}
	if c.ExemptionsConfigMap != "" {
		if _, _, err := ParseConfigMapRef(c.ExemptionsConfigMap); err != nil {
			bad("exemptions-configmap", "%v", err)
		}
	}
	if c.Scan.ConfigMap != "" {
		if _, _, err := ParseConfigMapRef(c.Scan.ConfigMap); err != nil {
			bad("scan.configMap", "%v", err)
		}
		if c.Scan.Interval != 0 {
			bad("scan.configMap", "and scan.interval are both set: with scan.configMap another workload scans and serve only reads its result; unset scan.interval")
		}
	}
	// Slices, not maps, so that the same config always gives the same
	// message in the same order.
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
	for _, f := range []struct{ key, path string }{{"client-ca-file", c.ClientCAFile}, {"requestheader-client-ca-file", c.RequestheaderClientCAFile}} {
		if f.path != "" && !c.ServesTLS() {
			bad(f.key, "needs tls-cert-file and tls-key-file: client certificates only exist over TLS")
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
	if c.MaxStoredClusters < 1 {
		bad("max-stored-clusters", "must be at least 1, got %d", c.MaxStoredClusters)
	}
	if c.MaxAPIServersPerCluster < 1 {
		bad("max-apiservers-per-cluster", "must be at least 1, got %d", c.MaxAPIServersPerCluster)
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
	errs = append(errs, c.Ingest.validateManaged()...)
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
