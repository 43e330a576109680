// Package aggregate decides which audit events count and turns them into
// exact, durable counts.
//
// Ingest packages (webhook, Kafka, files) convert what they receive into
// Event values and call Aggregator.Ingest. The aggregator classifies each
// event (which stage, deprecated or not, which API, hour, node and client),
// and commits the resulting requests to the store. Concurrent Ingest calls are
// group-committed: one badger transaction and one fsync serve them all, and
// each call returns only once its own requests are on disk.
//
// The package does not parse JSON or speak HTTP; that belongs to ingest.
package aggregate

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/store"
)

// ErrStopped is returned by Ingest once the aggregator has stopped.
var ErrStopped = errors.New("aggregate: stopped")

// UserAgentMode says how much of the user agent is kept.
type UserAgentMode string

const (
	// UserAgentShort keeps the user agent up to its first space, as
	// OpenShift does: "kubectl/v1.32.4 (linux/amd64) kubernetes/abc" is
	// kept as "kubectl/v1.32.4".
	UserAgentShort UserAgentMode = "short"
	// UserAgentFull keeps the whole user agent, up to MaxUserAgentBytes.
	UserAgentFull UserAgentMode = "full"
)

// Bounds on stored strings, the same as OpenShift's APIRequestCount CRD.
const (
	MaxUsernameBytes  = 512
	MaxUserAgentBytes = 1024
)

// maxGroupCommit bounds how many Ingest calls share one commit.
const maxGroupCommit = 64

// Options configures New.
type Options struct {
	Store      *store.Store
	Logger     zerolog.Logger
	Registerer prometheus.Registerer
	// UserAgent is UserAgentShort (the default) or UserAgentFull.
	UserAgent UserAgentMode
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Catalog tells removed releases and already-removed APIs; nil means
	// the built-in catalog.
	Catalog *catalog.Catalog
	// FieldRules finds deprecated fields in request bodies; nil means none.
	FieldRules *fieldrule.Set
	// IsSystem classifies usernames for the system label; nil means none
	// is system.
	IsSystem func(username string) bool
	// Retention applies when there is no Store (a client-side dry run);
	// zero means store.DefaultRetention.
	Retention time.Duration
	// ClusterVersions holds the apiserver release of clusters that have
	// one configured. With it, requests without the deprecation annotation
	// (apiservers before 1.19) are judged by the catalog.
	ClusterVersions map[string]catalog.Release
}

// Aggregator classifies events and group-commits their counts.
type Aggregator struct {
	store      *store.Store
	log        zerolog.Logger
	uaMode     UserAgentMode
	now        func() time.Time
	catalog    *catalog.Catalog
	versions   map[string]catalog.Release
	retention  time.Duration
	isSystem   func(string) bool
	fieldRules *fieldrule.Set
	metrics    *metrics
	jobs       chan *job
	stopped    chan struct{}
	runCalled  bool
}

type job struct {
	reqs    []store.Request
	cursors []store.Cursor
	done    chan jobResult
}

type jobResult struct {
	dup []bool
	err error
}

// New builds an aggregator. Call Run to start committing.
func New(opts Options) *Aggregator {
	if opts.Catalog == nil {
		// The built-in catalog is compiled in and tested; it cannot fail.
		opts.Catalog, _ = catalog.New(nil)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.IsSystem == nil {
		opts.IsSystem = func(string) bool { return false }
	}
	if opts.UserAgent == "" {
		opts.UserAgent = UserAgentShort
	}
	return &Aggregator{
		store:      opts.Store,
		log:        opts.Logger.With().Str("component", "aggregate").Logger(),
		uaMode:     opts.UserAgent,
		now:        opts.Now,
		catalog:    opts.Catalog,
		versions:   opts.ClusterVersions,
		retention:  cmp.Or(opts.Retention, store.DefaultRetention),
		isSystem:   opts.IsSystem,
		fieldRules: opts.FieldRules,
		metrics:    newMetrics(opts.Registerer),
		jobs:       make(chan *job),
		stopped:    make(chan struct{}),
	}
}

// Run commits queued requests until ctx is done. Ingest calls that were
// already accepted when ctx ends are still committed before Run returns.
func (a *Aggregator) Run(ctx context.Context) {
	defer close(a.stopped)
	for {
		select {
		case j := <-a.jobs:
			a.commit(j)
		case <-ctx.Done():
			for {
				select {
				case j := <-a.jobs:
					a.commit(j)
				default:
					return
				}
			}
		}
	}
}

// commit writes first and every job already waiting behind it in one store
// call: the group commit.
func (a *Aggregator) commit(first *job) {
	group := []*job{first}
	n := len(first.reqs)
collect:
	for len(group) < maxGroupCommit {
		select {
		case j := <-a.jobs:
			group = append(group, j)
			n += len(j.reqs)
		default:
			break collect
		}
	}
	all := make([]store.Request, 0, n)
	var cursors []store.Cursor
	for _, j := range group {
		all = append(all, j.reqs...)
		// Later jobs of one input carry later positions; the store keeps
		// the last value written per name.
		cursors = append(cursors, j.cursors...)
	}
	start := time.Now()
	dup, err := a.store.Apply(all, cursors...)
	a.metrics.commitDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		a.metrics.commitErrors.Inc()
		a.log.Error().Err(err).Int("requests", n).Msg("commit failed; the senders get an error and will retry")
	}
	off := 0
	for _, j := range group {
		r := jobResult{err: err}
		if err == nil {
			r.dup = dup[off : off+len(j.reqs)]
		}
		off += len(j.reqs)
		j.done <- r
	}
}

// Origin says where a set of events came from.
type Origin struct {
	// Source is the ingest path: "webhook", "kafka" or "file".
	Source  string
	Cluster string
	Node    string
}

// Summary tells what became of the events of one Ingest call.
type Summary struct {
	Counted    int `json:"counted"`
	Duplicates int `json:"duplicates"`
	// Skipped counts events that are not counted by design: other stages,
	// APIs that are not deprecated, expired hours.
	Skipped int `json:"skipped"`
	// SkippedBy breaks Skipped down by reason (a Result).
	SkippedBy map[string]int `json:"skippedBy,omitempty"`
	// FieldMatches counts requests newly counted by field rules; an event
	// can be skipped as an API request and still set a deprecated field.
	FieldMatches int `json:"fieldMatches,omitempty"`
}

// skip records one skipped event.
func (s *Summary) skip(r Result) {
	s.Skipped++
	if s.SkippedBy == nil {
		s.SkippedBy = map[string]int{}
	}
	s.SkippedBy[string(r)]++
}

// Tally records what became of one event.
func (s *Summary) Tally(r Result) {
	switch r {
	case ResultCounted:
		s.Counted++
	case ResultDuplicate:
		s.Duplicates++
	default:
		s.skip(r)
	}
}

// Ingest classifies events and commits the counted ones. It returns once
// they are durable. A non-nil error means nothing of this call may be
// assumed committed; re-sending the same events is always safe because
// counted requests are deduplicated.
func (a *Aggregator) Ingest(ctx context.Context, origin Origin, events []Event) (Summary, error) {
	return a.IngestAt(ctx, origin, events)
}

// IngestAt is Ingest that also commits input positions (cursors) in the same
// transaction as the counts of events, even when none of them counts.
func (a *Aggregator) IngestAt(ctx context.Context, origin Origin, events []Event, cursors ...store.Cursor) (Summary, error) {
	reqs, sum := a.Classify(origin, events)
	applied, err := a.Apply(ctx, origin.Source, reqs, cursors...)
	sum.Add(applied)
	return sum, err
}

// countRequest adds one committed request to sunset_deprecated_requests_total.
func (a *Aggregator) countRequest(r store.Request) {
	k := r.Key
	group, version, resource := SplitAPIName(k.API)
	state := "deprecated"
	if k.Removed {
		state = "removed"
	}
	a.metrics.requests.WithLabelValues(k.Cluster, group, version, resource, k.Subresource, r.RemovedRelease, k.Verb,
		strconv.FormatBool(k.DryRun), strconv.FormatBool(a.isSystem(k.Username)), state).Inc()
}
