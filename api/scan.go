package api

import (
	"time"

	"github.com/kube-sunset/sunset/scan"
)

// ClusterScan is the server's latest scan of its own cluster (Helm
// releases, CRD stored versions, APIServices): scan.Periodic.
type ClusterScan interface {
	Latest() (res scan.Result, at time.Time, lastErr error, ok bool)
}

// WithClusterScan makes every upgrade check join the cluster scan's
// findings, judged at the check's target, to the traffic's.
func (s *Service) WithClusterScan(c ClusterScan) { s.clusterScan = c }

// withClusterScan joins the latest cluster scan, if any has succeeded.
func (s *Service) withClusterScan(res CheckResult, o CheckOptions) CheckResult {
	if s.clusterScan == nil {
		return res
	}
	latest, _, _, ok := s.clusterScan.Latest()
	if !ok {
		return res
	}
	JoinScan(&res, latest.At(o.Target), o.WarningsAsErrors)
	return res
}

// ScanExitCode is the exit code of a scan alone: ExitError when an input
// could not be read (the verdict would be a guess), else as a check's.
func ScanExitCode(r scan.Result, warningsAsErrors bool) int {
	switch {
	case len(r.Errors) > 0:
		return ExitError
	case r.Removed() > 0:
		return ExitRemoved
	case r.Deprecated() > 0 && warningsAsErrors:
		return ExitDeprecated
	}
	return ExitSafe
}

// JoinScan adds a scan to a check for one verdict over both: removed APIs
// in either give ExitRemoved; otherwise an incomplete scan gives
// ExitError, since "safe" would be a guess; otherwise deprecated ones
// (with warnings as errors) give ExitDeprecated.
func JoinScan(res *CheckResult, sres scan.Result, warningsAsErrors bool) {
	res.Scan, res.ScanVerdict = &sres, sres.Verdict(warningsAsErrors)
	scanCode := ScanExitCode(sres, warningsAsErrors)
	switch {
	case res.ExitCode == ExitRemoved || scanCode == ExitRemoved:
		res.ExitCode = ExitRemoved
	case scanCode == ExitError:
		res.ExitCode = ExitError
	default:
		res.ExitCode = max(res.ExitCode, scanCode)
	}
}
