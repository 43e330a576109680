// Package exporter turns stored counts into Prometheus gauges that tell
// which deprecated APIs are in use now, and which admission webhooks are
// called on which resources (admission.go).
//
// Upstream's apiserver_requested_deprecated_apis is set to 1 and never goes
// back to 0. Here every gauge is computed from the store over a sliding
// window at scrape time: an API that stops being used falls to 0 when its
// last request leaves the window, and its series disappears once it has
// shown 0 for a grace period. Nothing is kept in memory between scrapes
// beyond a short cache, so restarts change nothing.
package exporter

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/store"
)

// Querier reads counts. *store.Store implements it.
type Querier interface {
	APIs() []store.APIInfo
	ScanCounts(cluster, api string, from, to time.Time, fn func(store.CountKey, uint64) error) error
}

// Options configures New.
type Options struct {
	Querier Querier
	// Window is how far back the gauge counts; zero means 24h.
	Window time.Duration
	// Grace is how long a series shows 0 before it disappears; zero
	// means 1h.
	Grace time.Duration
	// Refresh bounds how often the store is scanned; zero scans on every
	// scrape.
	Refresh         time.Duration
	IsSystem        func(username string) bool
	ClusterVersions map[string]catalog.Release
	// RemovalHorizon is the "within N releases" of the alert rules,
	// exported so rules never need editing.
	RemovalHorizon int
	Now            func() time.Time
}

// Label values of state.
const (
	StateDeprecated = "deprecated"
	StateRemoved    = "removed"
)

var usageLabels = []string{"cluster", "group", "version", "resource", "subresource", "removed_release", "verb", "dry_run", "system", "state"}

var (
	usageDesc = prometheus.NewDesc("sunset_deprecated_requests",
		"Requests to deprecated or removed APIs in the sliding window (metrics.window, default 24h). Falls to 0 when an API stops being used; the series disappears after metrics.grace.",
		usageLabels, nil)
	untilRemovalDesc = prometheus.NewDesc("sunset_api_releases_until_removal",
		"Kubernetes minor releases until an API in use is removed: its removed release minus the cluster's configured version (clusters.<name>.version). 1 means the next release; 0 or less means already removed.",
		[]string{"cluster", "group", "version", "resource", "removed_release"}, nil)
	horizonDesc = prometheus.NewDesc("sunset_removal_horizon_releases",
		"The metrics.removal-horizon setting: how many releases ahead the shipped alert rules warn about removals (EUS upgrades skip releases).",
		nil, nil)
)

// Collector is a prometheus.Collector of the usage gauges.
type Collector struct {
	o     Options
	cache cache
}

// cache keeps computed metrics for up to refresh, within one hour.
type cache struct {
	mu        sync.Mutex
	cachedAt  time.Time
	cachedFor time.Time
	cached    []prometheus.Metric
}

func (c *cache) get(now time.Time, refresh time.Duration, compute func(time.Time) ([]prometheus.Metric, error)) ([]prometheus.Metric, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if refresh > 0 && time.Since(c.cachedAt) < refresh && now.Truncate(time.Hour).Equal(c.cachedFor.Truncate(time.Hour)) {
		return c.cached, nil
	}
	ms, err := compute(now)
	if err != nil {
		return nil, err
	}
	c.cached, c.cachedAt, c.cachedFor = ms, time.Now(), now
	return ms, nil
}

// New builds a Collector; register it on the server's registry.
func New(o Options) *Collector {
	if o.Window <= 0 {
		o.Window = 24 * time.Hour
	}
	if o.Grace <= 0 {
		o.Grace = time.Hour
	}
	if o.IsSystem == nil {
		o.IsSystem = func(string) bool { return false }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Collector{o: o}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- usageDesc
	ch <- untilRemovalDesc
	ch <- horizonDesc
}

// Collect implements prometheus.Collector. A store error is reported as an
// invalid metric, so the scrape shows it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(horizonDesc, prometheus.GaugeValue, float64(c.o.RemovalHorizon))
	metrics, err := c.metrics()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(usageDesc, err)
		return
	}
	for _, m := range metrics {
		ch <- m
	}
}

func (c *Collector) metrics() ([]prometheus.Metric, error) {
	return c.cache.get(c.o.Now(), c.o.Refresh, c.compute)
}

type usageKey struct {
	cluster, group, version, resource, subresource, removed, verb, dryRun, system, state string
}

type apiKey struct{ cluster, group, version, resource, removed string }

// compute scans the window and the grace period before it. Hours count in
// the window when they start after now-window: a 24h window is the current
// hour and the 23 before it, as in APIRequestCount's last24h.
func (c *Collector) compute(now time.Time) ([]prometheus.Metric, error) {
	cur := now.UTC().Truncate(time.Hour)
	windowStart := cur.Add(-c.o.Window + time.Hour)
	graceStart := windowStart.Add(-c.o.Grace)
	usage := map[usageKey]float64{}
	inUse := map[apiKey]bool{}
	for _, info := range c.o.Querier.APIs() {
		if strings.HasPrefix(info.API, aggregate.FieldRulePrefix) {
			continue // field rules are not APIs
		}
		group, version, resource := aggregate.SplitAPIName(info.API)
		err := c.o.Querier.ScanCounts(info.Cluster, info.API, graceStart, cur, func(k store.CountKey, n uint64) error {
			key := usageKey{cluster: k.Cluster, group: group, version: version, resource: resource, subresource: k.Subresource,
				removed: info.RemovedRelease, verb: k.Verb, dryRun: boolString(k.DryRun), system: boolString(c.o.IsSystem(k.Username)), state: StateDeprecated}
			if k.Removed {
				key.state = StateRemoved
			}
			if k.Hour.Before(windowStart) {
				usage[key] += 0 // seen in the grace period: shown as 0
				return nil
			}
			usage[key] += float64(n)
			inUse[apiKey{k.Cluster, group, version, resource, info.RemovedRelease}] = true
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]prometheus.Metric, 0, len(usage)+len(inUse))
	for k, v := range usage {
		out = append(out, prometheus.MustNewConstMetric(usageDesc, prometheus.GaugeValue, v,
			k.cluster, k.group, k.version, k.resource, k.subresource, k.removed, k.verb, k.dryRun, k.system, k.state))
	}
	for k := range inUse {
		clusterVersion, ok := c.o.ClusterVersions[k.cluster]
		removed, err := catalog.ParseRelease(k.removed)
		if !ok || err != nil || removed.Major != clusterVersion.Major {
			continue
		}
		out = append(out, prometheus.MustNewConstMetric(untilRemovalDesc, prometheus.GaugeValue,
			float64(removed.Minor-clusterVersion.Minor), k.cluster, k.group, k.version, k.resource, k.removed))
	}
	return out, nil
}

func boolString(b bool) string { return strconv.FormatBool(b) }
