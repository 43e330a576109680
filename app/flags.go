package app

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

const envPrefix = "SUNSET"

// Flags declares one flag per config key, with the defaults of
// DefaultConfig.
func Flags() *pflag.FlagSet {
	d := DefaultConfig()
	fs := pflag.NewFlagSet("config", pflag.ContinueOnError)
	fs.String("data-dir", d.DataDir, "badger data directory")
	fs.String("listen", d.Listen, "HTTP(S) listen address for the webhook, the API and /metrics; beyond loopback, readers must authenticate and the webhook needs credentials (or --allow-unauthenticated, --webhook-allow-unauthenticated)")
	fs.String("tls-cert-file", d.TLSCertFile, "serve HTTPS and HTTP/2 with this certificate (PEM)")
	fs.String("tls-key-file", d.TLSKeyFile, "private key (PEM) of --tls-cert-file")
	fs.String("tls-client-ca-file", d.TLSClientCAFile, "require webhook clients to present a certificate signed by this CA; its CN names the node")
	fs.String("webhook-token-file", d.WebhookTokenFile, "require this bearer token (file contents) on the webhook, from any apiserver")
	fs.String("webhook-token-auth-file", d.WebhookTokenAuthFile, "require a bearer token from this CSV file (kube-apiserver's --token-auth-file format, user = <cluster>/<node>), each valid only for its apiserver's path")
	fs.Bool("webhook-allow-unauthenticated", d.WebhookAllowUnauthenticated, "accept webhook batches without credentials on a listen address that is not loopback")
	fs.String("authentication-kubeconfig", d.AuthenticationKubeconfig, "kubeconfig of the kube-apiserver that checks readers' tokens (TokenReview) and holds extension-apiserver-authentication; in a pod the in-cluster config is the default")
	fs.String("authorization-kubeconfig", d.AuthorizationKubeconfig, "kubeconfig of the kube-apiserver that authorizes reads and resets (SubjectAccessReview); in a pod the in-cluster config is the default")
	fs.Bool("authentication-skip-lookup", d.AuthenticationSkipLookup, "do not read client-ca-file and requestheader-* from the cluster's extension-apiserver-authentication ConfigMap")
	fs.String("client-ca-file", d.ClientCAFile, "authenticate readers by client certificates signed by this CA (CN is the user, O the groups)")
	fs.String("requestheader-client-ca-file", d.RequestheaderClientCAFile, "trust the front-proxy headers of calls whose client certificate this CA signed (kube-apiserver's aggregator)")
	fs.StringSlice("requestheader-allowed-names", d.RequestheaderAllowedNames, "common names of front-proxy client certificates to trust; empty means any signed by requestheader-client-ca-file")
	fs.StringSlice("requestheader-username-headers", d.RequestheaderUsernameHeaders, "front-proxy headers that carry the user name (default X-Remote-User)")
	fs.StringSlice("requestheader-uid-headers", d.RequestheaderUIDHeaders, "front-proxy headers that carry the user's UID")
	fs.StringSlice("requestheader-group-headers", d.RequestheaderGroupHeaders, "front-proxy headers that carry the groups (default X-Remote-Group)")
	fs.StringSlice("requestheader-extra-headers-prefix", d.RequestheaderExtraHeadersPrefix, "front-proxy header prefixes for user extras (default X-Remote-Extra-)")
	fs.String("token-auth-file", d.TokenAuthFile, "reader tokens, one per line: token,user,uid,\"group1,group2\" (kube-apiserver's format)")
	fs.StringSlice("authorization-read-groups", d.AuthorizationReadGroups, "without a cluster to authorize: groups that may read the API and /metrics")
	fs.StringSlice("authorization-reset-groups", d.AuthorizationResetGroups, "without a cluster to authorize: groups that may also reset (DELETE)")
	fs.StringSlice("authorization-always-allow-paths", d.AuthorizationAlwaysAllowPaths, "paths anyone may GET; add /metrics to leave it open")
	fs.Bool("allow-unauthenticated", d.AllowUnauthenticated, "let anyone who reaches the port read, reset and scrape, even beyond loopback (logged as a warning)")
	fs.String("default-cluster", d.DefaultCluster, "cluster name for webhook paths that name none")
	fs.String("user-agent", d.UserAgent, "keep the user agent up to its first space (short) or whole (full)")
	fs.String("decoder", d.Decoder, "prefilter (set aside events that cannot count without decoding them) or full (decode every event)")
	fs.Int64("max-body-bytes", d.MaxBodyBytes, "largest webhook body accepted, in bytes")
	fs.Int("max-inflight-batches", d.MaxInFlightBatches, "webhook batches handled at once; more get 429 with Retry-After")
	fs.Duration("retention", d.Retention, "how long hourly counts and dedupe marks are kept")
	fs.Int("max-clients-per-node-hour", d.MaxClientsPerNodeHour, "clients (username and user agent) kept per API, apiserver node and hour; further ones are counted as client \"other\"")
	fs.Duration("shutdown-timeout", d.ShutdownTimeout, "how long SIGTERM waits for in-flight batches")
	fs.String("log-level", d.LogLevel, "trace, debug, info, warn or error")
	fs.String("log-format", d.LogFormat, "auto, json or console")
	fs.StringSlice("system-users", d.SystemUsers, "usernames classified as system traffic; a trailing * matches a prefix")
	return fs
}

// LoadConfig merges, from lowest to highest precedence, defaults, the config
// file, SUNSET_* environment variables and flags that were set. Unknown keys
// in the file or the environment are errors, and so are invalid values; all
// problems are reported together.
func LoadConfig(flags *pflag.FlagSet, configFile string) (Config, error) {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	v.AutomaticEnv()
	if err := v.BindPFlags(flags); err != nil {
		return Config{}, err
	}
	keys := configKeys(reflect.TypeFor[Config](), "")
	for _, k := range keys {
		// Nested keys (kafka.sasl.password) come from the environment
		// only when bound; map entries (clusters.*) cannot.
		if !strings.Contains(k, "*") {
			if err := v.BindEnv(k); err != nil {
				return Config{}, err
			}
		}
	}
	var errs []error
	if configFile != "" {
		// viper's not-found error is unreliable for an explicit file
		// (spf13/viper#1783), so check it ourselves.
		if _, err := os.Stat(configFile); err != nil {
			return Config{}, fmt.Errorf("config file: %w", err)
		}
		v.SetConfigFile(configFile)
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("reading config file %s: %w", configFile, err)
		}
		var unknown []string
		for _, key := range fileKeys(v) {
			if !matchesAny(key, keys) {
				unknown = append(unknown, key)
			}
		}
		if len(unknown) > 0 {
			errs = append(errs, fmt.Errorf("config file %s: unknown keys %s; known keys are %s",
				configFile, strings.Join(unknown, ", "), strings.Join(keys, ", ")))
		}
	}
	errs = append(errs, unknownEnv(os.Environ(), keys)...)
	if len(errs) > 0 {
		// Values are checked once the keys are right.
		return Config{}, errors.Join(errs...)
	}
	// Decode over the defaults: nested keys (metrics.window) have no flag
	// to carry theirs.
	cfg := DefaultConfig()
	if err := v.UnmarshalExact(&cfg); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	return cfg, cfg.Validate()
}

// fileKeys are the keys the config file itself sets.
func fileKeys(v *viper.Viper) []string {
	var out []string
	for _, k := range v.AllKeys() {
		if v.InConfig(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// configKeys lists every key of a config struct type, lowercased as viper
// keeps them; "*" stands for any map key (clusters.*.version). Lists of
// structs are single keys (catalog.extra).
func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.ToLower(f.Tag.Get("mapstructure"))
		if name == "" {
			continue
		}
		key := prefix + name
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Duration]():
			out = append(out, configKeys(ft, key+".")...)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			out = append(out, configKeys(ft.Elem(), key+".*.")...)
		default:
			out = append(out, key)
		}
	}
	return out
}

// matchesAny reports whether key is one of patterns, "*" matching one
// segment.
func matchesAny(key string, patterns []string) bool {
	parts := strings.Split(key, ".")
	for _, p := range patterns {
		pp := strings.Split(p, ".")
		if len(pp) != len(parts) {
			continue
		}
		ok := true
		for i := range pp {
			if pp[i] != "*" && pp[i] != parts[i] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// unknownEnv reports SUNSET_* variables that match no key: a typo there would
// otherwise be silently ignored.
func unknownEnv(environ, keys []string) []error {
	names := map[string]bool{}
	for _, k := range keys {
		if !strings.Contains(k, "*") {
			names[envPrefix+"_"+strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(k))] = true
		}
	}
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix+"_") && !names[name] {
			errs = append(errs, fmt.Errorf("environment variable %s matches no config key", name))
		}
	}
	return errs
}
