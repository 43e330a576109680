package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-sunset/sunset/catalog"
)

// MetricsConfig is the metrics key.
type MetricsConfig struct {
	Window         time.Duration `mapstructure:"window"`
	Grace          time.Duration `mapstructure:"grace"`
	RemovalHorizon int           `mapstructure:"removal-horizon"`
	Refresh        time.Duration `mapstructure:"refresh"`
	MaxSeries      int           `mapstructure:"max-series"`
	MaxClusters    int           `mapstructure:"max-clusters"`
}

// Validate checks the metrics key; the window may reach back as far as
// the retention keeps counts.
func (m MetricsConfig) Validate(retention time.Duration) error {
	var errs []error
	bad := badFunc(&errs)
	if m.Window < time.Hour || m.Window > retention {
		bad("metrics.window", "%s must be from 1h to the retention (%s)", m.Window, retention)
	}
	if m.Grace < 0 {
		bad("metrics.grace", "must not be negative, got %s", m.Grace)
	}
	if m.RemovalHorizon < 1 {
		bad("metrics.removal-horizon", "must be at least 1 release, got %d", m.RemovalHorizon)
	}
	if m.Refresh < 0 {
		bad("metrics.refresh", "must not be negative, got %s", m.Refresh)
	}
	if m.MaxSeries < 1 {
		bad("metrics.max-series", "must be at least 1, got %d", m.MaxSeries)
	}
	if m.MaxClusters < 1 {
		bad("metrics.max-clusters", "must be at least 1, got %d", m.MaxClusters)
	}
	return errors.Join(errs...)
}

// CatalogConfig is the catalog key.
type CatalogConfig struct {
	Extra []catalog.Entry `mapstructure:"extra"`
}

// Validate checks the extra entries as the catalog takes them.
func (c CatalogConfig) Validate() error {
	_, err := catalog.New(c.Extra)
	return err
}

// ClusterConfig is one entry of the clusters key.
type ClusterConfig struct {
	Version string `mapstructure:"version"`
}

// validateClusters checks each cluster's version, in the order of their
// names, so that the same config always gives the same message.
func validateClusters(clusters map[string]ClusterConfig) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(clusters)) {
		if v := clusters[name].Version; v != "" {
			if _, err := catalog.ParseRelease(v); err != nil {
				errs = append(errs, fmt.Errorf("clusters.%s.version: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ScanConfig is the scan key: the server's scan of its own cluster.
type ScanConfig struct {
	Interval  time.Duration `mapstructure:"interval"`
	ConfigMap string        `mapstructure:"configMap"`
}

// Validate checks the scan key: a scan of its own, or another
// workload's read from a ConfigMap, not both.
func (s ScanConfig) Validate() error {
	var errs []error
	bad := badFunc(&errs)
	if s.Interval != 0 && s.Interval < time.Minute {
		bad("scan.interval", "%s is shorter than 1m; a cluster scan lists every Helm release record", s.Interval)
	}
	if s.ConfigMap != "" {
		if _, _, err := ParseConfigMapRef(s.ConfigMap); err != nil {
			bad("scan.configMap", "%v", err)
		}
		if s.Interval != 0 {
			bad("scan.configMap", "and scan.interval are both set: with scan.configMap another workload scans and "+
				"serve only reads its result; unset scan.interval")
		}
	}
	return errors.Join(errs...)
}

// ParseConfigMapRef reads the namespace/name of scan.configMap and
// exemptions-configmap.
func ParseConfigMapRef(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", fmt.Errorf("%q is not namespace/name, as sunset/sunset-cluster-scan", s)
	}
	return namespace, name, nil
}

// badFunc appends to errs an error naming key, as every Validate reports
// a problem.
func badFunc(errs *[]error) func(key, format string, args ...any) {
	return func(key, format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
}
