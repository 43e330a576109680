package api

import (
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/scan/report"
	"github.com/kube-sunset/sunset/verdict"
)

// ClusterScan is the server's latest scan of its own cluster (Helm
// releases, CRD stored versions, APIServices): scan.Periodic.
type ClusterScan interface {
	Latest() (res report.Result, at time.Time, lastErr error, ok bool)
}

// WithClusterScan makes every upgrade check join the cluster scan's
// findings, judged at the check's target, to the traffic's.
func (s *Service) WithClusterScan(c ClusterScan) { s.clusterScan = c }

// withClusterScan joins the latest cluster scan, if any has succeeded.
func (s *Service) withClusterScan(res sunsetv1.CheckResult, o verdict.CheckOptions) sunsetv1.CheckResult {
	if s.clusterScan == nil {
		return res
	}
	latest, _, _, ok := s.clusterScan.Latest()
	if !ok {
		return res
	}
	verdict.JoinScan(&res, latest.At(o.Target), o.WarningsAsErrors)
	return res
}
