package scan

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan/report"
)

// Periodic keeps the latest scan of a cluster, so that the server can
// answer "what will the next helm upgrade send" beside its traffic. It
// either scans the cluster itself, again and again, from inside it
// (NewPeriodic), or reads, again and again, what a scan in another
// workload published in a ConfigMap (NewPublished), so that the server
// itself needs no read on the cluster's Secrets. Scans are judged against
// the catalog's horizon, the furthest target there is; At narrows a
// result to any nearer target without scanning again.
type Periodic struct {
	// fetch gets the latest scan and when it ended; ok is false when
	// there is none yet, which is no error.
	fetch    func(context.Context) (res report.Result, at time.Time, ok bool, err error)
	what     string
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
	if err := JudgeAtHorizon(c); err != nil {
		return nil, err
	}
	fetch := func(ctx context.Context) (report.Result, time.Time, bool, error) {
		res, err := c.Scan(ctx)
		return res, now(), err == nil, err
	}
	return newPeriodic(fetch, "cluster scan", interval, reg, logger, now)
}

// NewPublished reads, every interval once Run starts, the scan another
// workload published (Publish) in ConfigMap name of configMaps: a get on
// that one ConfigMap is all it needs. Its metrics are the same as
// NewPeriodic's, registered on reg, and say when that scan ended.
func NewPublished(configMaps corev1client.ConfigMapInterface, name string, interval time.Duration, reg prometheus.Registerer, logger zerolog.Logger, now func() time.Time) (*Periodic, error) {
	fetch := func(ctx context.Context) (report.Result, time.Time, bool, error) {
		return ReadPublished(ctx, configMaps, name)
	}
	return newPeriodic(fetch, "published cluster scan", interval, reg, logger, now)
}

// JudgeAtHorizon makes c judge against the catalog's horizon, as a scan
// the server keeps must be: At narrows it to any target.
func JudgeAtHorizon(c *Cluster) error {
	horizon, err := catalog.Horizon()
	if err != nil {
		return err
	}
	c.Judge.Target = horizon
	return nil
}

func newPeriodic(fetch func(context.Context) (report.Result, time.Time, bool, error), what string, interval time.Duration,
	reg prometheus.Registerer, logger zerolog.Logger, now func() time.Time) (*Periodic, error) {
	p := &Periodic{fetch: fetch, what: what, interval: interval, logger: logger, now: now, scanned: make(chan struct{}, 1),
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

// Run scans (or reads the published scan) now, then every interval,
// until ctx is done. A scan that fails is logged and kept as the error;
// the last good result stays.
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
	res, at, ok, err := p.fetch(ctx)
	p.mu.Lock()
	p.err = err
	fresh := err == nil && ok && !at.Equal(p.at)
	if fresh {
		p.latest, p.at = res, at
	}
	p.mu.Unlock()
	switch {
	case err != nil:
		p.logger.Warn().Err(err).Msg(p.what + " failed; keeping the last result")
	case fresh:
		p.record(res, at)
		p.logger.Info().Int("findings", len(res.Findings)).Int("not_scanned", len(res.NotScanned)).
			Int("helm_releases", res.Scanned.HelmReleases).Int("crds", res.Scanned.CRDs).Time("scanned_at", at).Msg("cluster scanned")
	}
	select {
	case p.scanned <- struct{}{}:
	default:
	}
}

func (p *Periodic) record(res report.Result, at time.Time) {
	p.findings.Reset()
	for _, f := range res.Findings {
		p.findings.WithLabelValues(f.Rule, f.APIVersion, f.Kind, f.RemovedIn).Inc()
	}
	p.notScanned.Reset()
	for _, n := range res.NotScanned {
		p.notScanned.WithLabelValues(n.Resource).Set(1)
	}
	p.lastSuccess.WithLabelValues().Set(float64(at.Unix()))
}

// Latest is the last good scan, when it ended, and the error of the last
// attempt if it failed; ok is false before any scan reached the cluster.
func (p *Periodic) Latest() (res report.Result, at time.Time, lastErr error, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latest, p.at, p.err, !p.at.IsZero()
}

// PublishedKey is the key of the scan's ConfigMap (binaryData) that
// Publish writes and ReadPublished reads: the result as gzipped JSON.
const PublishedKey = "scan.json.gz"

// maxPublishedBytes bounds what ReadPublished inflates: a ConfigMap holds
// at most 1 MiB, and a scan's JSON compresses about tenfold, so this is
// far above any real scan and far below harm.
const maxPublishedBytes = 64 << 20

// published is what a scan workload hands the server.
type published struct {
	// ScannedAt is when the scan ended.
	ScannedAt time.Time `json:"scannedAt"`
	// Result is judged at the scanner's catalog horizon.
	Result report.Result `json:"result"`
}

// Publish writes res, a scan that ended at, into ConfigMap name of
// configMaps, which must exist: the manifests create it empty, so that
// the scanner needs only get and update on that one ConfigMap. Other keys
// of the ConfigMap are left alone.
func Publish(ctx context.Context, configMaps corev1client.ConfigMapInterface, name string, res report.Result, at time.Time) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(published{ScannedAt: at.UTC(), Result: res}); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := configMaps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading ConfigMap %s to publish the scan in: %w", name, err)
		}
		if cm.BinaryData == nil {
			cm.BinaryData = map[string][]byte{}
		}
		cm.BinaryData[PublishedKey] = buf.Bytes()
		if _, err := configMaps.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("publishing the scan in ConfigMap %s (%d bytes): %w", name, buf.Len(), err)
		}
		return nil
	})
}

// ReadPublished reads the scan Publish wrote in ConfigMap name: ok is
// false while none has been published. Whoever may update the ConfigMap
// writes what the server shows, so the content is bounded and checked.
func ReadPublished(ctx context.Context, configMaps corev1client.ConfigMapInterface, name string) (res report.Result, at time.Time, ok bool, err error) {
	cm, err := configMaps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return res, at, false, fmt.Errorf("reading the published scan: %w", err)
	}
	raw, found := cm.BinaryData[PublishedKey]
	if !found {
		return res, at, false, nil
	}
	p, err := decodePublished(raw)
	if err != nil {
		return res, at, false, fmt.Errorf("ConfigMap %s, %s: %w", name, PublishedKey, err)
	}
	return p.Result, p.ScannedAt, true, nil
}

func decodePublished(raw []byte) (published, error) {
	var p published
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return p, fmt.Errorf("not gzip: %w", err)
	}
	body, err := io.ReadAll(io.LimitReader(zr, maxPublishedBytes+1))
	if err != nil {
		return p, fmt.Errorf("inflating: %w", err)
	}
	if len(body) > maxPublishedBytes {
		return p, fmt.Errorf("inflates to more than %d bytes", maxPublishedBytes)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return p, fmt.Errorf("not a published scan: %w", err)
	}
	if p.ScannedAt.IsZero() {
		return p, errors.New("not a published scan: no scannedAt")
	}
	return p, nil
}
