package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/kube-sunset/sunset/app"
)

const envPrefix = "SUNSET"

// configFlags declares one flag per config key, with the defaults of
// app.DefaultConfig.
func configFlags() *pflag.FlagSet {
	d := app.DefaultConfig()
	fs := pflag.NewFlagSet("config", pflag.ContinueOnError)
	fs.String("data-dir", d.DataDir, "badger data directory")
	fs.String("listen", d.Listen, "HTTP(S) listen address for the webhook, the API and /metrics")
	fs.String("tls-cert-file", d.TLSCertFile, "serve HTTPS and HTTP/2 with this certificate (PEM)")
	fs.String("tls-key-file", d.TLSKeyFile, "private key (PEM) of --tls-cert-file")
	fs.String("default-cluster", d.DefaultCluster, "cluster name for webhook paths that name none")
	fs.String("user-agent", d.UserAgent, "keep the user agent up to its first space (short) or whole (full)")
	fs.Int64("max-body-bytes", d.MaxBodyBytes, "largest webhook body accepted, in bytes")
	fs.Int("max-inflight-batches", d.MaxInFlightBatches, "webhook batches handled at once; more get 429 with Retry-After")
	fs.Duration("retention", d.Retention, "how long hourly counts and dedupe marks are kept")
	fs.Duration("shutdown-timeout", d.ShutdownTimeout, "how long SIGTERM waits for in-flight batches")
	fs.String("log-level", d.LogLevel, "trace, debug, info, warn or error")
	fs.String("log-format", d.LogFormat, "auto, json or console")
	fs.StringSlice("system-users", d.SystemUsers, "usernames classified as system traffic; a trailing * matches a prefix")
	return fs
}

// loadConfig merges, from lowest to highest precedence, defaults, the config
// file, SUNSET_* environment variables and flags that were set. Unknown keys
// in the file or the environment are errors, and so are invalid values; all
// problems are reported together.
func loadConfig(flags *pflag.FlagSet, configFile string) (app.Config, error) {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	v.AutomaticEnv()
	if err := v.BindPFlags(flags); err != nil {
		return app.Config{}, err
	}
	var errs []error
	if configFile != "" {
		// viper's not-found error is unreliable for an explicit file
		// (spf13/viper#1783), so check it ourselves.
		if _, err := os.Stat(configFile); err != nil {
			return app.Config{}, fmt.Errorf("config file: %w", err)
		}
		v.SetConfigFile(configFile)
		if err := v.ReadInConfig(); err != nil {
			return app.Config{}, fmt.Errorf("reading config file %s: %w", configFile, err)
		}
	}
	var known []string
	flags.VisitAll(func(f *pflag.Flag) { known = append(known, f.Name) })
	errs = append(errs, unknownEnv(os.Environ(), known)...)
	var unknownFileKeys []string
	for _, key := range v.AllKeys() {
		if !slices.Contains(known, key) && !fileOnlyKey(key) {
			unknownFileKeys = append(unknownFileKeys, key)
		}
	}
	if len(unknownFileKeys) > 0 {
		errs = append(errs, fmt.Errorf("config file %s: unknown keys %s; known keys are %s, catalog.extra, clusters.<name>.version, ingest.files",
			configFile, strings.Join(unknownFileKeys, ", "), strings.Join(known, ", ")))
		return app.Config{}, errors.Join(errs...)
	}

	var cfg app.Config
	if err := v.UnmarshalExact(&cfg); err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	return cfg, errors.Join(errs...)
}

// unknownEnv reports SUNSET_* variables that match no key: a typo there would
// otherwise be silently ignored.
func unknownEnv(environ, keys []string) []error {
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, envPrefix+"_")
		if !ok {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		if !slices.Contains(keys, key) {
			errs = append(errs, fmt.Errorf("environment variable %s matches no config key", name))
		}
	}
	return errs
}

// fileOnlyKey reports whether key is one of the structured keys that only
// the config file can set: catalog.extra, ingest.files and
// clusters.<name>.version.
func fileOnlyKey(key string) bool {
	if key == "catalog.extra" || key == "ingest.files" {
		return true
	}
	parts := strings.Split(key, ".")
	return len(parts) == 3 && parts[0] == "clusters" && parts[2] == "version"
}
