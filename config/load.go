package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

const envPrefix = "SUNSET"

// Flags declares a flag for each top-level config key of a plain value,
// with its default and help from Keys.
func Flags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("config", pflag.ContinueOnError)
	for _, k := range Keys() {
		if k.Flag == "" {
			continue
		}
		switch v := k.value.Interface().(type) {
		case string:
			fs.String(k.Flag, v, k.Help)
		case bool:
			fs.Bool(k.Flag, v, k.Help)
		case int:
			fs.Int(k.Flag, v, k.Help)
		case int64:
			fs.Int64(k.Flag, v, k.Help)
		case time.Duration:
			fs.Duration(k.Flag, v, k.Help)
		case []string:
			fs.StringSlice(k.Flag, v, k.Help)
		default:
			panic(fmt.Sprintf("config: key %s of type %T has no flag type", k.Name, v))
		}
	}
	return fs
}

// Load merges, from lowest to highest precedence, defaults, the config
// file, SUNSET_* environment variables and flags that were set. Unknown keys
// in the file or the environment are errors, and so are invalid values; all
// problems are reported together.
func Load(flags *pflag.FlagSet, configFile string) (Config, error) {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	v.AutomaticEnv()
	if err := v.BindPFlags(flags); err != nil {
		return Config{}, err
	}
	keys := keyPatterns()
	for _, k := range keys {
		// Nested keys (kafka.sasl.password) come from the environment
		// only when bound; map entries (clusters.*) cannot.
		if !strings.Contains(k, "*") && !strings.Contains(k, listEntry) {
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
	cfg := Default()
	if err := v.UnmarshalExact(&cfg, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		mapstructure.StringToTimeDurationHookFunc(), mapstructure.StringToSliceHookFunc(","), objectListFromJSON, timeToString))); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if configFile != "" {
		cfg.secretsInFile = secretsInFile(v, configFile)
	}
	return cfg, cfg.Validate()
}

// timeToString keeps a time the YAML reader made of an unquoted date or
// time (an exemption's expires: 2026-12-31) for a key that is a string,
// in RFC 3339, as it would have been written quoted.
func timeToString(from, to reflect.Type, data any) (any, error) {
	if t, ok := data.(time.Time); ok && to.Kind() == reflect.String {
		return t.Format(time.RFC3339Nano), nil
	}
	return data, nil
}

// objectListFromJSON reads a list of objects (ingest.eks) written in the
// environment, where it can only be a string: a JSON array, as in
// SUNSET_INGEST_EKS='[{"cluster":"prod","region":"eu-west-1"}]'.
func objectListFromJSON(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Slice || to.Elem().Kind() != reflect.Struct {
		return data, nil
	}
	var items []map[string]any
	if err := json.Unmarshal([]byte(data.(string)), &items); err != nil {
		return nil, fmt.Errorf("a list of objects in the environment is a JSON array of objects: %w", err)
	}
	return items, nil
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

// keyPatterns lists every key lowercased, as viper keeps them, with "*"
// for any map key (clusters.*.version). Lists of objects are single keys
// (catalog.extra).
func keyPatterns() []string {
	var out []string
	for _, k := range Keys() {
		out = append(out, strings.ToLower(strings.ReplaceAll(k.Name, mapKeyName, "*")))
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
		if !strings.Contains(k, "*") && !strings.Contains(k, listEntry) {
			names[envName(k)] = true
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
