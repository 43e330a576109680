package app

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/scan"
)

// buildClusterScan prepares the scan of Sunset's own cluster when
// scan.interval is set: in a pod with its service account, elsewhere with
// KUBECONFIG or ~/.kube/config, as client-go's loading rules choose.
func (a *App) buildClusterScan(reg prometheus.Registerer, now func() time.Time) error {
	if a.cfg.Scan.Interval == 0 {
		return nil
	}
	rest, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("scan.interval: reaching the cluster to scan: %w", err)
	}
	c, err := scan.NewCluster(rest, scan.Judge{Catalog: a.parts.Catalog, Fields: a.parts.Rules})
	if err != nil {
		return fmt.Errorf("scan.interval: %w", err)
	}
	a.clusterScan, err = scan.NewPeriodic(c, a.cfg.Scan.Interval, reg, a.log.With().Str("component", "scan").Logger(), now)
	return err
}

// clusterScanResults is the cluster scan for the API, or nil: a nil
// *scan.Periodic in the interface would not read as "no scan".
func (a *App) clusterScanResults() api.ClusterScan {
	if a.clusterScan == nil {
		return nil
	}
	return a.clusterScan
}
