// Package aggregate is the committer: it turns the requests that
// classify makes of audit events into exact, durable counts.
//
// Ingest packages (webhook, Kafka, files) convert what they receive into
// classify.Event values and call Aggregator.Ingest, which classifies each
// event with its classify.Classifier and commits the resulting requests
// (countkey.Request) to the store. Concurrent Ingest calls are
// group-committed: one badger transaction and one fsync serve them all,
// and each call returns only once its own requests are on disk, with one
// outcome per request. The fleet drives the halves apart: Classify, and
// Apply for requests classified elsewhere. The counting metrics are
// counted here, once a commit tells what became of each request.
//
// The package does not parse JSON or speak HTTP; that belongs to ingest.
package aggregate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/store"
)

// ErrStopped is returned by Ingest once the aggregator has stopped.
var ErrStopped = errors.New("aggregate: stopped")

// maxGroupCommit bounds how many Ingest calls share one commit.
const maxGroupCommit = 64

// Options configures New.
type Options struct {
	Store      *store.Store
	Logger     zerolog.Logger
	Registerer prometheus.Registerer
	// UserAgent is UserAgentShort (the default) or UserAgentFull.
	UserAgent classify.UserAgentMode
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
	// Admission configures the admission webhook counter.
	Admission AdmissionOptions
	// Labels bounds the label values and series of
	// sunset_deprecated_requests_total; nil means a Guard with the
	// defaults.
	Labels *cardinality.Guard
}

// Aggregator classifies events and group-commits their counts.
type Aggregator struct {
	store *store.Store
	// cls classifies events into the requests the loop commits.
	cls       *classify.Classifier
	log       zerolog.Logger
	now       func() time.Time
	isSystem  func(string) bool
	metrics   *metrics
	admission admissionCounter
	labels    *cardinality.Guard
	series    *cardinality.Series
	reads     *readWatch
	jobs      chan *job
	stopped   chan struct{}
	// noSpace is set while commits are refused for lack of disk space, so
	// that the condition is logged once, not at every retried batch.
	noSpace bool
}

// job is one Ingest or Apply call's commit: its requests, of every
// subject, and its cursors.
type job struct {
	source  string
	reqs    []countkey.Request
	cursors []countkey.Cursor
	done    chan jobResult
}

// jobResult is what the store made of a job: one outcome per request,
// aligned with job.reqs, or the error of its commit.
type jobResult struct {
	out []countkey.Outcome
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
	if opts.Labels == nil {
		opts.Labels = cardinality.New(cardinality.Options{Catalog: opts.Catalog})
	}
	reads := newReadWatch(opts.Labels, opts.Now, opts.Store, opts.Logger.With().Str("component", "aggregate").Logger())
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(reads)
	}
	return &Aggregator{
		reads:     reads,
		admission: newAdmissionCounter(opts.Admission, opts.Registerer),
		labels:    opts.Labels,
		series:    opts.Labels.Series(requestsMetric, requestsLabels, "dry_run", "system", "state"),
		store:     opts.Store,
		cls:       newClassifier(opts),
		log:       opts.Logger.With().Str("component", "aggregate").Logger(),
		now:       opts.Now,
		isSystem:  opts.IsSystem,
		metrics:   newMetrics(opts.Registerer),
		jobs:      make(chan *job),
		stopped:   make(chan struct{}),
	}
}

// newClassifier is the classifier of an aggregator of opts, which has its
// catalog: one that a dry run without a store can use too.
func newClassifier(opts Options) *classify.Classifier {
	co := classify.Options{UserAgent: opts.UserAgent, Catalog: opts.Catalog, FieldRules: opts.FieldRules,
		ClusterVersions: opts.ClusterVersions, Retention: cmp.Or(opts.Retention, store.DefaultRetention), Resolver: opts.Admission.Resolver}
	if opts.Store != nil {
		co.Expired = opts.Store.Expired
	}
	return classify.New(co)
}

// Classifier is the aggregator's classifier: what Ingest classifies
// events with.
func (a *Aggregator) Classifier() *classify.Classifier { return a.cls }

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
// call: the group commit. When that fails for anything but a lack of
// disk space, each job of the group is committed again alone, so that
// a job at fault (a cursor that cannot be stored, a fault of the store's
// own with one job's records) fails alone and the others commit and are
// told so: one sender's data never fails another's commit.
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
	// The two debug lines bracket the badger commits and their
	// bookkeeping, so that a crash test can tell a kill during a commit
	// from one between commits; the second comes once the commit's
	// metrics are counted and its senders told, so that a test that wakes
	// at it finds counts and metrics alike. Admission
	// counts commit before the transaction that carries the cursors, so a
	// cursor is never ahead of either counter: after a crash in between,
	// the input is read again and the admission counter sees only
	// duplicates.
	a.log.Debug().Int("requests", n).Msg("commit started")
	results, err := a.commitGroup(group)
	if err != nil && !errors.Is(err, countkey.ErrNoSpace) && len(group) > 1 {
		// A full disk is everyone's: the senders pause and retry. Any
		// other failure may be one job's: each alone finds which.
		a.log.Warn().Err(err).Int("jobs", len(group)).Int("requests", n).Msg("group commit failed; committing each of its jobs alone")
		var full error
		for i, j := range group {
			if full != nil {
				// The disk filled meanwhile: the rest wait for room
				// like everyone else.
				results[i].err = full
				continue
			}
			r, err := a.commitGroup([]*job{j})
			results[i] = r[0]
			if errors.Is(err, countkey.ErrNoSpace) {
				full = err
			}
		}
	}
	committed := false
	var noSpace error
	for i, j := range group {
		switch r := results[i]; {
		case r.err == nil:
			committed = true
		case errors.Is(r.err, countkey.ErrNoSpace):
			noSpace = r.err
		default:
			a.log.Error().Err(r.err).Str("source", j.source).Int("requests", len(j.reqs)).
				Bool("unstorable", errors.Is(r.err, countkey.ErrUnstorable)).Msg("commit failed; the sender gets an error")
		}
	}
	switch {
	case noSpace != nil:
		if !a.noSpace {
			a.noSpace = true
			a.log.Warn().Err(noSpace).Msg("not committing: the data directory is short of space; senders get 503 and retry, Kafka and followed files pause")
		}
	case committed && a.noSpace:
		a.noSpace = false
		a.log.Info().Msg("the data directory has room again; committing")
	}
	for i, j := range group {
		j.done <- results[i]
	}
	if committed {
		a.log.Debug().Msg("commit finished")
	}
}

// commitGroup writes the jobs of group in one store call, and counts the
// metrics of each once it is committed. A non-nil error is that of every
// result.
func (a *Aggregator) commitGroup(group []*job) ([]jobResult, error) {
	n := 0
	for _, j := range group {
		n += len(j.reqs)
	}
	all := make([]countkey.Request, 0, n)
	var cursors []countkey.Cursor
	for _, j := range group {
		all = append(all, j.reqs...)
		// Later jobs of one input carry later positions; the store keeps
		// the last value written per name.
		cursors = append(cursors, j.cursors...)
	}
	out, err := a.store.Commit(all, cursors...)
	results := make([]jobResult, len(group))
	if err != nil {
		for i := range results {
			results[i].err = err
		}
		return results, err
	}
	for i, j := range group {
		results[i].out, out = out[:len(j.reqs)], out[len(j.reqs):]
		a.countCommitted(j, results[i].out)
	}
	return results, nil
}

// countCommitted updates the metrics of a committed job's API requests;
// ingested counts its admission requests. It runs here, not in Ingest,
// because Ingest may have given up waiting (its sender timed out) while
// the commit went through.
func (a *Aggregator) countCommitted(j *job, out []countkey.Outcome) {
	counted, duplicates := 0, 0
	var groups map[labelInputs]int
	var order []labelGroup
	for i, r := range j.reqs {
		switch o := out[i]; {
		case r.Subject() != countkey.SubjectAPI:
		case o.Duplicate:
			duplicates++
		case o.Skipped != "":
			a.metrics.events.WithLabelValues(j.source, string(o.Skipped)).Inc()
		default:
			counted++
			if groups == nil {
				groups = map[labelInputs]int{}
			}
			in := inputsOf(r)
			if g, ok := groups[in]; ok {
				order[g].n++
				continue
			}
			groups[in] = len(order)
			order = append(order, labelGroup{req: r, n: 1})
		}
	}
	for _, g := range order {
		a.countRequests(g.req, g.n)
	}
	a.metrics.events.WithLabelValues(j.source, string(classify.ResultCounted)).Add(float64(counted))
	a.metrics.events.WithLabelValues(j.source, string(classify.ResultDuplicate)).Add(float64(duplicates))
}

// labelInputs is what countRequest makes a request's label values of:
// requests alike in these get the same series.
type labelInputs struct {
	cluster, api, subresource, removedRelease, verb, username string
	dryRun, removed                                           bool
}

func inputsOf(r countkey.Request) labelInputs {
	k := r.Key
	return labelInputs{cluster: k.Cluster, api: k.API, subresource: k.Subresource, removedRelease: r.RemovedRelease,
		verb: k.Verb, username: k.Username, dryRun: k.DryRun, removed: k.Removed}
}

// labelGroup is n committed requests of a job alike in their labelInputs,
// req the first of them.
type labelGroup struct {
	req countkey.Request
	n   int
}

// Ingest classifies events and commits the counted ones. It returns once
// they are durable. A non-nil error means nothing of this call may be
// assumed committed; re-sending the same events is always safe because
// counted requests are deduplicated.
func (a *Aggregator) Ingest(ctx context.Context, origin classify.Origin, events []classify.Event) (classify.Summary, error) {
	return a.IngestAt(ctx, origin, events)
}

// IngestAt is Ingest that also commits input positions (cursors) in the same
// transaction as the counts of events, even when none of them counts.
func (a *Aggregator) IngestAt(ctx context.Context, origin classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	j, sum := a.ingestJob(origin, events, cursors)
	if j == nil {
		return sum, nil
	}
	r, err := a.submit(ctx, j)
	if err != nil {
		return sum, err
	}
	return a.ingested(origin, j, r, sum), nil
}

// ingestJob classifies events into the job IngestAt commits, nil when
// there is nothing to commit, and what became of the others.
func (a *Aggregator) ingestJob(origin classify.Origin, events []classify.Event, cursors []countkey.Cursor) (*job, classify.Summary) {
	reqs, sum := a.classifyAll(origin, events, true)
	if len(reqs) == 0 && len(cursors) == 0 {
		return nil, sum
	}
	return &job{source: origin.Source, reqs: reqs, cursors: cursors, done: make(chan jobResult, 1)}, sum
}

// ingested adds the committed job j, whose result is r, to sum.
func (a *Aggregator) ingested(origin classify.Origin, j *job, r jobResult, sum classify.Summary) classify.Summary {
	sum.Admission = a.admission.committed(origin, j.reqs, r.out)
	sum.Committed(j.reqs, r.out)
	return sum
}

// classifyAll decides which of events count: it returns the requests to
// APIs, then the matches of field rules and, with admission, the
// admission webhook requests; sum tells what was skipped.
func (a *Aggregator) classifyAll(origin classify.Origin, events []classify.Event, admission bool) (reqs []countkey.Request, sum classify.Summary) {
	now := a.now()
	a.noteEvents(origin, events)
	reqs = make([]countkey.Request, 0, len(events))
	var fields, adm []countkey.Request
	for i := range events {
		fields = append(fields, a.cls.FieldRequests(origin, &events[i], now)...)
		if admission {
			if f := events[i].Admission; f != nil && f.Invalid > 0 {
				a.admission.invalid.Add(float64(f.Invalid))
			}
			if r, ok := a.cls.AdmissionRequest(origin, &events[i], now); ok {
				adm = append(adm, r)
			}
		}
		a.countDropped(origin.Source, events[i].Dropped)
		req, res := a.cls.Request(origin, &events[i], now)
		if res != classify.ResultCounted {
			a.metrics.events.WithLabelValues(origin.Source, string(res)).Inc()
			sum.Tally(res)
			continue
		}
		reqs = append(reqs, req)
	}
	return append(append(reqs, fields...), adm...), sum
}

// submit hands j to the commit loop and waits until it is durable. A
// non-nil error means nothing may be assumed committed.
func (a *Aggregator) submit(ctx context.Context, j *job) (jobResult, error) {
	select {
	case a.jobs <- j:
	case <-a.stopped:
		return jobResult{}, ErrStopped
	case <-ctx.Done():
		return jobResult{}, ctx.Err()
	}
	var r jobResult
	select {
	case r = <-j.done:
	case <-ctx.Done():
		// The commit still happens; a retry of these events will be
		// recognised as duplicates.
		return r, ctx.Err()
	}
	if r.err != nil {
		return r, fmt.Errorf("aggregate: committing %d requests: %w", len(j.reqs), r.err)
	}
	return r, nil
}

// countRequests adds n committed requests alike in their labelInputs, r
// one of them, to sunset_deprecated_requests_total, their label values
// bounded: they come from the sender. The labels are made once for all n,
// which is what a replica counting a busy fleet spends most on here,
// unless the bound folded them: each request then meets the bound alone,
// so that the overflow counts stay one per request.
func (a *Aggregator) countRequests(r countkey.Request, n int) {
	if !a.countRequest(r, n) {
		for range n - 1 {
			a.countRequest(r, 1)
		}
	}
}

// countRequest adds r to sunset_deprecated_requests_total n times if no
// label value of it is folded, and once, reporting false, if some are.
func (a *Aggregator) countRequest(r countkey.Request, n int) bool {
	k := r.Key
	group, version, resource := a.labels.API(countkey.SplitAPIName(k.API))
	state := catalog.StateDeprecated
	if k.Removed {
		state = catalog.StateRemoved
	}
	cluster := a.labels.Cluster(requestsMetric, k.Cluster)
	values := []string{cluster, group, version, resource,
		cardinality.Subresource(k.Subresource), cardinality.Release(r.RemovedRelease), cardinality.Verb(k.Verb),
		strconv.FormatBool(k.DryRun), strconv.FormatBool(a.isSystem(k.Username)), state}
	labels := a.series.Labels(values)
	// Series.Labels hands values back unless it folded them; a cluster
	// named "other" cannot tell, so it goes alone.
	whole := cluster == k.Cluster && k.Cluster != cardinality.Other && &labels[0] == &values[0]
	c := a.metrics.requests.WithLabelValues(labels...)
	if !whole {
		c.Inc()
		return false
	}
	c.Add(float64(n))
	return true
}
