// Package classify decides which audit events count, and as what: an
// event becomes the requests it counts as (countkey.Request), to a
// deprecated or removed API, to the field rules whose fields it sets, and
// to the admission webhooks it passed through, each with its identity
// for dedupe, its key and its sighting, or the Result that says why it
// does not count. It also tells inputs which events may count before
// they decode them (Interest) and sums up what became of a batch
// (Summary).
//
// It is pure: it reads the catalog, the field rules and the clock, and
// neither stores nor counts metrics. The committer (aggregate) commits
// what it returns; the fleet's filter sends it to other replicas.
package classify

import (
	"cmp"
	"time"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fieldrule"
)

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

// Options configures New.
type Options struct {
	// UserAgent is UserAgentShort (the default) or UserAgentFull.
	UserAgent UserAgentMode
	// Catalog tells removed releases and already-removed APIs; nil means
	// the built-in catalog.
	Catalog *catalog.Catalog
	// FieldRules finds deprecated fields in request bodies; nil means none.
	FieldRules *fieldrule.Set
	// ClusterVersions holds the apiserver release of clusters that have
	// one configured. With it, requests without the deprecation annotation
	// (apiservers before 1.19) are judged by the catalog.
	ClusterVersions map[string]catalog.Release
	// Expired reports whether the store no longer keeps an hour (the
	// store's Expired); nil applies Retention.
	Expired func(hour time.Time) bool
	// Retention applies when Expired is nil (a client-side dry run).
	Retention time.Duration
	// Resolver names the configuration of validating admission webhooks;
	// nil leaves it empty.
	Resolver *admission.Resolver
}

// Classifier turns events into the requests they count as.
type Classifier struct {
	uaMode     UserAgentMode
	catalog    *catalog.Catalog
	versions   map[string]catalog.Release
	fieldRules *fieldrule.Set
	expired    func(time.Time) bool
	retention  time.Duration
	resolver   *admission.Resolver
}

// New builds a classifier.
func New(opts Options) *Classifier {
	if opts.Catalog == nil {
		// The built-in catalog is compiled in and tested; it cannot fail.
		opts.Catalog, _ = catalog.New(nil)
	}
	return &Classifier{
		uaMode:     cmp.Or(opts.UserAgent, UserAgentShort),
		catalog:    opts.Catalog,
		versions:   opts.ClusterVersions,
		fieldRules: opts.FieldRules,
		expired:    opts.Expired,
		retention:  opts.Retention,
		resolver:   opts.Resolver,
	}
}
