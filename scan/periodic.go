package scan

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan/report"
)

// Periodic scans a cluster again and again, from inside it, and keeps the
// latest result, so that the server can answer "what will the next helm
// upgrade send" beside its traffic. It judges against the catalog's
// horizon, the furthest target there is; At narrows a result to any
// nearer target without scanning again.
type Periodic struct {
	cluster  *Cluster
	interval time.Duration
	logger   zerolog.Logger
	now      func() time.Time

	mu     sync.Mutex
	latest report.Result
	at     time.Time
	err    error
	// scanned is signalled after each scan, for tests that wait for one.
	scanned chan struct{}

	findings, notScanned, lastSuccess *prometheus.GaugeVec
}

// NewPeriodic scans c every interval once Run starts. Its metrics are
// registered on reg.
func NewPeriodic(c *Cluster, interval time.Duration, reg prometheus.Registerer, logger zerolog.Logger, now func() time.Time) (*Periodic, error) {
	horizon, err := catalog.Horizon()
	if err != nil {
		return nil, err
	}
	c.Judge.Target = horizon
	p := &Periodic{cluster: c, interval: interval, logger: logger, now: now, scanned: make(chan struct{}, 1),
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sunset_scan_findings",
			Help: "Objects in the cluster's latest deployed Helm releases, CRD stored versions and APIServices that use an API the catalog deprecates or removes, by rule, API version, kind and the release that removes it (empty if none is planned), as of the last cluster scan."},
			[]string{"rule", "api_version", "kind", "removed_in"}),
		notScanned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sunset_scan_not_scanned",
			Help: "Resources the last cluster scan could not list (1), by resource: a gap in the scan, most often missing RBAC."},
			[]string{"resource"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sunset_scan_last_success_timestamp_seconds",
			Help: "When the last cluster scan that reached the cluster ended, in Unix seconds."}, nil),
	}
	for _, c := range []prometheus.Collector{p.findings, p.notScanned, p.lastSuccess} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Run scans now, then every interval, until ctx is done. A scan that
// fails is logged and kept as the error; the last good result stays.
func (p *Periodic) Run(ctx context.Context) error {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		p.scanOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *Periodic) scanOnce(ctx context.Context) {
	res, err := p.cluster.Scan(ctx)
	p.mu.Lock()
	p.err = err
	if err == nil {
		p.latest, p.at = res, p.now()
	}
	p.mu.Unlock()
	if err != nil {
		p.logger.Warn().Err(err).Msg("cluster scan failed; keeping the last result")
	} else {
		p.record(res)
		p.logger.Info().Int("findings", len(res.Findings)).Int("not_scanned", len(res.NotScanned)).
			Int("helm_releases", res.Scanned.HelmReleases).Int("crds", res.Scanned.CRDs).Msg("cluster scanned")
	}
	select {
	case p.scanned <- struct{}{}:
	default:
	}
}

func (p *Periodic) record(res report.Result) {
	p.findings.Reset()
	for _, f := range res.Findings {
		p.findings.WithLabelValues(f.Rule, f.APIVersion, f.Kind, f.RemovedIn).Inc()
	}
	p.notScanned.Reset()
	for _, n := range res.NotScanned {
		p.notScanned.WithLabelValues(n.Resource).Set(1)
	}
	p.lastSuccess.WithLabelValues().Set(float64(p.now().Unix()))
}

// Latest is the last good scan, when it ended, and the error of the last
// attempt if it failed; ok is false before any scan reached the cluster.
func (p *Periodic) Latest() (res report.Result, at time.Time, lastErr error, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latest, p.at, p.err, !p.at.IsZero()
}
