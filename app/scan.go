package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/parts"
	"github.com/kube-sunset/sunset/scan"
)

// kubeConfig reaches Sunset's own cluster: in a pod with its service
// account, elsewhere with KUBECONFIG or ~/.kube/config, as client-go's
// loading rules choose.
func kubeConfig() (*rest.Config, error) {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
}

// configMapPoll is how often serve reads the ConfigMap of scan.configMap
// and of exemptions-configmap: one get of one object.
const configMapPoll = time.Minute

// buildClusterScan prepares what serve knows of its own cluster's scan:
// with scan.configMap, the scan another workload publishes there, read
// every minute; with scan.interval, a scan of its own.
func (a *App) buildClusterScan(reg prometheus.Registerer, now func() time.Time) error {
	logger := a.log.With().Str("component", "scan").Logger()
	switch {
	case a.cfg.Scan.ConfigMap != "":
		namespace, name, err := config.ParseConfigMapRef(a.cfg.Scan.ConfigMap)
		if err != nil {
			return fmt.Errorf("scan.configMap: %w", err)
		}
		rest, err := kubeConfig()
		if err != nil {
			return fmt.Errorf("scan.configMap: reaching the cluster to read the scan from: %w", err)
		}
		kube, err := kubernetes.NewForConfig(rest)
		if err != nil {
			return fmt.Errorf("scan.configMap: %w", err)
		}
		a.clusterScan, err = scan.NewPublished(kube.CoreV1().ConfigMaps(namespace), name, configMapPoll, reg, logger, now)
		return err
	case a.cfg.Scan.Interval != 0:
		rest, err := kubeConfig()
		if err != nil {
			return fmt.Errorf("scan.interval: reaching the cluster to scan: %w", err)
		}
		c, err := scan.NewCluster(rest, scan.Judge{Catalog: a.parts.Catalog, Fields: a.parts.Rules})
		if err != nil {
			return fmt.Errorf("scan.interval: %w", err)
		}
		a.clusterScan, err = scan.NewPeriodic(c, a.cfg.Scan.Interval, reg, logger, now)
		return err
	}
	return nil
}

// clusterScanResults is the cluster scan for the API, or nil: a nil
// *scan.Periodic in the interface would not read as "no scan".
func (a *App) clusterScanResults() api.ClusterScan {
	if a.clusterScan == nil {
		return nil
	}
	return a.clusterScan
}

// PublishScan scans Sunset's own cluster once, as serve's own scan would,
// and writes the result into the ConfigMap of scan.configMap, for serve to
// read: `sunset publish-scan`, the cluster scan's own workload, which
// holds the permissions to list Secrets so that the pod taking the
// webhook does not. Gaps in the scan are published with it; a cluster
// that cannot be reached, or a ConfigMap that cannot be written, is an
// error and leaves the last published scan in place.
func PublishScan(ctx context.Context, cfg config.Config, logger zerolog.Logger) error {
	if cfg.Scan.ConfigMap == "" {
		return errors.New("scan.configMap (SUNSET_SCAN_CONFIGMAP) is not set: it names the ConfigMap to publish the scan in, namespace/name")
	}
	namespace, name, err := config.ParseConfigMapRef(cfg.Scan.ConfigMap)
	if err != nil {
		return fmt.Errorf("scan.configMap: %w", err)
	}
	logger = logger.With().Str("component", "scan").Logger()
	p, err := parts.Open(cfg, parts.Options{NoStore: true, Logger: logger})
	if err != nil {
		return err
	}
	rest, err := kubeConfig()
	if err != nil {
		return fmt.Errorf("reaching the cluster to scan: %w", err)
	}
	c, err := scan.NewCluster(rest, scan.Judge{Catalog: p.Catalog, Fields: p.Rules})
	if err != nil {
		return err
	}
	if err := scan.JudgeAtHorizon(c); err != nil {
		return err
	}
	res, err := c.Scan(ctx)
	if err != nil {
		return err
	}
	at := time.Now()
	if err := scan.Publish(ctx, c.Kube.CoreV1().ConfigMaps(namespace), name, res, at); err != nil {
		return err
	}
	for _, n := range res.NotScanned {
		logger.Warn().Str("resource", n.Resource).Str("namespace", n.Namespace).Str("reason", n.Reason).Msg("not scanned")
	}
	logger.Info().Str("configmap", cfg.Scan.ConfigMap).Int("findings", len(res.Findings)).Int("not_scanned", len(res.NotScanned)).
		Int("helm_releases", res.Scanned.HelmReleases).Int("crds", res.Scanned.CRDs).Msg("cluster scanned and published")
	return nil
}
