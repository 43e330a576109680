// Package cardinality bounds the label values Sunset puts on its Prometheus
// metrics, so that no sender, buggy or hostile, can add series without end
// and take down the Prometheus that scrapes Sunset.
//
// Every label value that comes from an audit event or a URL path goes
// through a Guard:
//
//   - verbs are the Kubernetes request verbs, or "other";
//   - group, version and resource are kept when the API lifecycle catalog
//     lists the API, or when they are valid Kubernetes names (the apiserver
//     annotated the request as deprecated, as it does for CRDs); anything
//     else is "other";
//   - clusters are kept when configured, and otherwise the first MaxClusters
//     seen; later ones are "other";
//   - each metric has at most MaxSeries series; label sets beyond that are
//     folded into "other" series that keep only the labels from small fixed
//     sets (dry_run, system, state), so sums stay exact.
//
// Whatever is folded is counted in sunset_metrics_overflow_total and logged
// once per metric and limit. The package does not decide what is counted:
// the store and the query API keep every request, whatever its labels.
package cardinality

import (
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-sunset/sunset/catalog"
)

// Other is the label value that stands for everything beyond a bound.
const Other = "other"

// Defaults of Options.
const (
	// DefaultMaxSeries fits every API of the catalog with all verbs,
	// dry-run and system combinations in a few clusters many times over.
	DefaultMaxSeries = 10000
	// DefaultMaxClusters bounds cluster names that are not configured.
	DefaultMaxClusters = 100
)

// Limits name the configuration keys in overflow metrics and logs.
const (
	LimitMaxSeries   = "metrics.max-series"
	LimitMaxClusters = "metrics.max-clusters"
)

// Options configures New. Its zero value, apart from Catalog, gives the
// defaults.
type Options struct {
	// MaxSeries bounds the series of each guarded metric. Zero means
	// DefaultMaxSeries.
	MaxSeries int
	// MaxClusters bounds the cluster label values that are not among
	// Clusters. Zero means DefaultMaxClusters.
	MaxClusters int
	// Clusters are the configured cluster names, always kept.
	Clusters []string
	// Catalog lists the APIs whose names are always kept; nil means the
	// built-in catalog.
	Catalog *catalog.Catalog
	// Registerer receives sunset_metrics_overflow_total; nil means none.
	Registerer prometheus.Registerer
	Logger     zerolog.Logger
}

// Guard bounds label values. It is safe for concurrent use; one Guard is
// shared by every metric of a server, so that they agree on clusters.
type Guard struct {
	maxSeries, maxClusters int
	configured             map[string]bool
	catalog                *catalog.Catalog
	overflow               *prometheus.CounterVec
	log                    zerolog.Logger

	mu       sync.Mutex
	clusters map[string]bool // the unconfigured clusters kept
	logged   map[[2]string]bool

	namesMu sync.Mutex
	names   map[[3]string]bool // validity of names the catalog lacks
}

// maxCachedNames bounds the cache of checked API names; past it the cache
// starts over.
const maxCachedNames = 4096

// New builds a Guard.
func New(o Options) *Guard {
	if o.MaxSeries <= 0 {
		o.MaxSeries = DefaultMaxSeries
	}
	if o.MaxClusters <= 0 {
		o.MaxClusters = DefaultMaxClusters
	}
	if o.Catalog == nil {
		// The built-in catalog is compiled in and tested; it cannot fail.
		o.Catalog, _ = catalog.New(nil)
	}
	g := &Guard{
		maxSeries: o.MaxSeries, maxClusters: o.MaxClusters, configured: map[string]bool{}, catalog: o.Catalog,
		log:      o.Logger.With().Str("component", "cardinality").Logger(),
		clusters: map[string]bool{}, logged: map[[2]string]bool{}, names: map[[3]string]bool{},
		overflow: promauto.With(o.Registerer).NewCounterVec(prometheus.CounterOpts{
			Name: "sunset_metrics_overflow_total",
			Help: "Label sets that did not get a series of their own, by metric and the limit that folded them into \"other\" (metrics.max-series, metrics.max-clusters): for counters each increment, for gauges each label set at each refresh.",
		}, []string{"metric", "limit"}),
	}
	for _, c := range o.Clusters {
		g.configured[c] = true
	}
	return g
}

// MaxSeries is the series bound of each metric.
func (g *Guard) MaxSeries() int { return g.maxSeries }

// requestVerbs are the verbs kube-apiserver gives resource requests.
var requestVerbs = map[string]bool{
	"get": true, "list": true, "watch": true, "create": true, "update": true,
	"patch": true, "delete": true, "deletecollection": true, "proxy": true,
}

// Verb is verb when it is a Kubernetes request verb, else Other: a sender
// can invent verbs without end. With Other there are 10 values, the limit
// of OpenShift's byVerb.
func Verb(verb string) string {
	if requestVerbs[verb] {
		return verb
	}
	return Other
}

// API returns the group, version and resource label values of an API: as
// given when the catalog lists it or when all three are valid Kubernetes
// names (the core group is empty), else Other for all three.
func (g *Guard) API(group, version, resource string) (string, string, string) {
	if g.Known(group, version, resource) || g.validAPI(group, version, resource) {
		return group, version, resource
	}
	return Other, Other, Other
}

// validAPI checks names the catalog lacks, remembering the answer: the
// checks are regular expressions, and every counted request asks.
func (g *Guard) validAPI(group, version, resource string) bool {
	k := [3]string{group, version, resource}
	g.namesMu.Lock()
	defer g.namesMu.Unlock()
	valid, ok := g.names[k]
	if !ok {
		if len(g.names) >= maxCachedNames {
			clear(g.names)
		}
		valid = validAPI(group, version, resource)
		g.names[k] = valid
	}
	return valid
}

// Known reports whether the catalog lists the API.
func (g *Guard) Known(group, version, resource string) bool {
	_, ok := g.catalog.Lookup(group, version, resource)
	return ok
}

func validAPI(group, version, resource string) bool {
	return (group == "" || len(validation.IsDNS1123Subdomain(group)) == 0) &&
		len(validation.IsDNS1123Label(version)) == 0 && len(validation.IsDNS1123Label(resource)) == 0
}

// Subresource is s when empty or a valid Kubernetes name, else Other.
func Subresource(s string) string {
	if s == "" || len(validation.IsDNS1123Label(s)) == 0 {
		return s
	}
	return Other
}

// Release is a removed release as "1.37", "" when there is none, or Other
// when it is not a release.
func Release(s string) string {
	if s == "" {
		return ""
	}
	r, err := catalog.ParseRelease(s)
	if err != nil {
		return Other
	}
	return r.String()
}

// Cluster returns the cluster's label value for metric: the name when it
// is configured or among the first MaxClusters others seen, else Other.
func (g *Guard) Cluster(metric, cluster string) string {
	if g.configured[cluster] {
		return cluster
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.clusters[cluster] {
		return cluster
	}
	if len(g.clusters) < g.maxClusters {
		g.clusters[cluster] = true
		return cluster
	}
	g.overflowLocked(metric, LimitMaxClusters, 1)
	return Other
}

// Overflow counts n label sets of metric folded by limit, and logs the
// first time each metric meets each limit.
func (g *Guard) Overflow(metric, limit string, n int) {
	if n <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.overflowLocked(metric, limit, n)
}

func (g *Guard) overflowLocked(metric, limit string, n int) {
	g.overflow.WithLabelValues(metric, limit).Add(float64(n))
	if k := [2]string{metric, limit}; !g.logged[k] {
		g.logged[k] = true
		g.log.Warn().Str("metric", metric).Str("limit", limit).
			Msg("a metric reached its cardinality limit; further label values are folded into \"other\" (counts stay exact in the store and the API). " +
				"A misbehaving or hostile sender can cause this; otherwise raise " + limit)
	}
}

// Series bounds the series of one metric whose series are created as
// samples arrive (a counter): the first MaxSeries label sets are kept, and
// later ones are folded.
type Series struct {
	g      *Guard
	metric string
	keep   []bool // by label index: kept when folding

	mu       sync.Mutex
	admitted map[string]bool
}

// Series returns the bound of metric, whose labels are names; the labels
// named in keep come from small fixed sets and are kept when folding.
func (g *Guard) Series(metric string, names []string, keep ...string) *Series {
	s := &Series{g: g, metric: metric, keep: make([]bool, len(names)), admitted: map[string]bool{}}
	for i, n := range names {
		s.keep[i] = slices.Contains(keep, n)
	}
	return s
}

// Labels returns values when their series exists or fits, else the folded
// values: Other except for the kept labels.
func (s *Series) Labels(values []string) []string {
	key := strings.Join(values, "\xff")
	s.mu.Lock()
	if s.admitted[key] {
		s.mu.Unlock()
		return values
	}
	if len(s.admitted) < s.g.maxSeries {
		s.admitted[key] = true
		s.mu.Unlock()
		return values
	}
	s.mu.Unlock()
	s.g.Overflow(s.metric, LimitMaxSeries, 1)
	return s.Fold(values)
}

// Fold returns values with every label but the kept ones set to Other.
func (s *Series) Fold(values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = Other
		if s.keep[i] {
			out[i] = v
		}
	}
	return out
}
