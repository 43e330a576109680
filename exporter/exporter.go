// Package exporter turns stored counts into Prometheus gauges that tell
// which deprecated APIs are in use now, and which admission webhooks are
// called on which resources (admission.go).
//
// Upstream's apiserver_requested_deprecated_apis is set to 1 and never goes
// back to 0. Here every gauge is computed from the store over a sliding
// window at scrape time: an API that stops being used falls to 0 when its
// last request leaves the window, and its series disappears once it has
// shown 0 for a grace period. Between scrapes only what the scans added
// up is kept, by API and hour (hours.go), and the store's versions say
// which of it may have changed since: a scrape rescans nothing of an idle
// API and only the current hour of a busy one. Restarts change nothing.
package exporter

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// Querier reads counts. *store.Store implements it. APIs must give each
// API's versions (store.Versions): what a scrape added up is kept, and
// read again only when they move.
type Querier interface {
	APIs() []store.APIInfo
	ScanCounts(cluster, api string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error
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
	// Labels bounds label values and series; nil means a Guard with the
	// defaults.
	Labels *cardinality.Guard
}

var usageLabels = []string{"cluster", "group", "version", "resource", "subresource", "removed_release", "verb", "dry_run", "system", "state"}

// Metric names, as the overflow metric names them.
const (
	usageName        = "sunset_deprecated_requests"
	untilRemovalName = "sunset_api_releases_until_removal"
)

var (
	usageDesc = prometheus.NewDesc(usageName,
		"Requests to deprecated or removed APIs in the sliding window (metrics.window, default 24h). Falls to 0 when an API stops being used; the series disappears after metrics.grace.",
		usageLabels, nil)
	untilRemovalDesc = prometheus.NewDesc(untilRemovalName,
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
	// hours keeps what the scans added up, so that a compute rescans
	// only the hours that may have changed.
	hours hourCache
	usage *cardinality.Series // folds usage series beyond the bound
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

// defaultWindow fills in what both collectors leave unset alike: a 24 h
// window, an hour's grace and the system clock.
func defaultWindow(window, grace *time.Duration, now *func() time.Time) {
	if *window <= 0 {
		*window = 24 * time.Hour
	}
	if *grace <= 0 {
		*grace = time.Hour
	}
	if *now == nil {
		*now = time.Now
	}
}

// New builds a Collector; register it on the server's registry.
func New(o Options) *Collector {
	defaultWindow(&o.Window, &o.Grace, &o.Now)
	if o.IsSystem == nil {
		o.IsSystem = func(string) bool { return false }
	}
	if o.Labels == nil {
		o.Labels = cardinality.New(cardinality.Options{})
	}
	return &Collector{o: o, usage: o.Labels.Series(usageName, usageLabels, "dry_run", "system", "state")}
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

func (k usageKey) values() []string {
	return []string{k.cluster, k.group, k.version, k.resource, k.subresource, k.removed, k.verb, k.dryRun, k.system, k.state}
}

type apiKey struct{ cluster, group, version, resource, removed string }

// rawSeries is what tells apart the usage series of one API, before the
// values are bounded into labels.
type rawSeries struct {
	subresource, verb       string
	dryRun, system, removed bool
}

// systemCache remembers IsSystem per username for one scrape: a scan
// meets the same clients in every hour and node.
type systemCache struct {
	isSystem func(string) bool
	known    map[string]bool
	last     string
	lastIs   bool
	haveLast bool
}

func (c *systemCache) of(username string) bool {
	if c.haveLast && username == c.last {
		return c.lastIs
	}
	is, ok := c.known[username]
	if !ok {
		is = c.isSystem(username)
		c.known[username] = is
	}
	c.last, c.lastIs, c.haveLast = username, is, true
	return is
}

// usage is one series of the usage gauge while it is computed.
type usage struct {
	value float64
	// known marks an API the catalog lists: such series are kept first
	// when there are more than the bound, so that a flood of made-up APIs
	// cannot push the APIs the alerts are about into "other".
	known bool
}

// compute scans the window and the grace period before it. Hours count in
// the window when they start after now-window: a 24h window is the current
// hour and the 23 before it, as in APIRequestCount's last24h.
func (c *Collector) compute(now time.Time) ([]prometheus.Metric, error) {
	cur := now.UTC().Truncate(time.Hour)
	windowStart := cur.Add(-c.o.Window + time.Hour)
	graceStart := windowStart.Add(-c.o.Grace)
	usages := map[usageKey]*usage{}
	inUse := map[apiKey]bool{}
	g := c.o.Labels
	clusters := map[string]string{} // label value by cluster, asked once per refresh
	system := systemCache{isSystem: c.o.IsSystem, known: map[string]bool{}}
	for _, info := range c.o.Querier.APIs() {
		origGroup, origVersion, origResource := countkey.SplitAPIName(info.API)
		known := g.Known(origGroup, origVersion, origResource)
		group, version, resource := g.API(origGroup, origVersion, origResource)
		removed := cardinality.Release(info.RemovedRelease)
		cluster, ok := clusters[info.Cluster]
		if !ok {
			cluster = g.Cluster(usageName, info.Cluster)
			clusters[info.Cluster] = cluster
		}
		// A scan meets each series of the API many times (every hour,
		// node and client): it adds up by the few raw fields that vary
		// first, and the labels are made once per series after it.
		series, err := c.hours.series(c.o.Querier, info, &system, cur, windowStart, graceStart)
		if err != nil {
			return nil, err
		}
		for rk, v := range series {
			key := usageKey{cluster: cluster, group: group, version: version, resource: resource, subresource: cardinality.Subresource(rk.subresource),
				removed: removed, verb: cardinality.Verb(rk.verb), dryRun: boolString(rk.dryRun), system: boolString(rk.system), state: catalog.StateDeprecated}
			if rk.removed {
				key.state = catalog.StateRemoved
			}
			u := usages[key]
			if u == nil {
				u = &usage{}
				usages[key] = u
			}
			u.known = u.known || known
			u.value += *v
			if *v > 0 {
				inUse[apiKey{cluster, group, version, resource, removed}] = true
			}
		}
	}
	c.hours.forgetUnseen()
	usages = c.boundUsage(usages)
	out := make([]prometheus.Metric, 0, len(usages)+len(inUse))
	for k, u := range usages {
		out = append(out, prometheus.MustNewConstMetric(usageDesc, prometheus.GaugeValue, u.value, k.values()...))
	}
	n := 0
	for _, k := range slices.SortedFunc(maps.Keys(inUse), compareAPIKeys(g)) {
		if n == g.MaxSeries() {
			g.Overflow(untilRemovalName, cardinality.LimitMaxSeries, len(inUse)-n)
			break
		}
		clusterVersion, ok := c.o.ClusterVersions[k.cluster]
		removed, err := catalog.ParseRelease(k.removed)
		if !ok || err != nil || removed.Major != clusterVersion.Major {
			continue
		}
		out = append(out, prometheus.MustNewConstMetric(untilRemovalDesc, prometheus.GaugeValue,
			float64(removed.Minor-clusterVersion.Minor), k.cluster, k.group, k.version, k.resource, k.removed))
		n++
	}
	return out, nil
}

// boundUsage keeps at most MaxSeries series: the APIs the catalog lists
// first, then the busiest, then in label order. The others are added up
// into the folded series, so that sums stay exact.
func (c *Collector) boundUsage(usages map[usageKey]*usage) map[usageKey]*usage {
	max := c.o.Labels.MaxSeries()
	if len(usages) <= max {
		return usages
	}
	keys := slices.SortedFunc(maps.Keys(usages), func(a, b usageKey) int {
		ua, ub := usages[a], usages[b]
		if ua.known != ub.known {
			if ua.known {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(ub.value, ua.value), slices.Compare(a.values(), b.values()))
	})
	out := make(map[usageKey]*usage, max+8)
	for _, k := range keys[:max] {
		out[k] = usages[k]
	}
	for _, k := range keys[max:] {
		v := c.usage.Fold(k.values())
		fk := usageKey{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]}
		if out[fk] == nil {
			out[fk] = &usage{}
		}
		out[fk].value += usages[k].value
	}
	c.o.Labels.Overflow(usageName, cardinality.LimitMaxSeries, len(keys)-max)
	return out
}

// compareAPIKeys orders APIs in use: those the catalog lists first, then by
// labels.
func compareAPIKeys(g *cardinality.Guard) func(a, b apiKey) int {
	return func(a, b apiKey) int {
		ka, kb := g.Known(a.group, a.version, a.resource), g.Known(b.group, b.version, b.resource)
		if ka != kb {
			if ka {
				return -1
			}
			return 1
		}
		return slices.Compare([]string{a.cluster, a.group, a.version, a.resource, a.removed}, []string{b.cluster, b.group, b.version, b.resource, b.removed})
	}
}

func boolString(b bool) string { return strconv.FormatBool(b) }
