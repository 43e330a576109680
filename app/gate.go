package app

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/api"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/gate"
	"github.com/kube-sunset/sunset/gate/admit"
	"github.com/kube-sunset/sunset/gate/capihook"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/verdict"
)

// GateConfig is the gate key: the upgrade gate, an admission webhook and
// a Cluster API runtime extension on the listen address (see gate.md).
type GateConfig struct {
	Enabled     bool              `mapstructure:"enabled" help:"Serve the upgrade gate on the listen address (HTTPS): the admission webhook at POST /gate/admit and the Cluster API runtime extension under /gate/capi, which refuse a raise of a cluster's minor Kubernetes release while APIs it removes are called. Neither asks for credentials. See gate.md."`
	Kinds       []gate.Kind       `mapstructure:"kinds" help:"Kinds that hold a cluster's Kubernetes version beside the seven built-in ones, each {group, kind, path}; one of the same group and kind replaces a built-in one. See gate.md#kinds."`
	Clusters    map[string]string `mapstructure:"clusters" help:"The Sunset cluster an object stands for, by the object's namespace/name (name alone for a cluster-scoped object), where it has no sunset.dev/cluster label or annotation; without either, its name is the cluster."`
	StaleAfter  time.Duration     `mapstructure:"staleAfter" help:"A cluster Sunset has heard nothing from for this long, or whose reads are missing, is unknown: gate.whenUnknown decides."`
	WhenUnknown string            `mapstructure:"whenUnknown" help:"allow lets an upgrade of an unknown cluster through with a warning; refuse refuses it (the override annotation still lets it through). A cluster Sunset never heard is always allowed, with a warning."`
	CleanFor    time.Duration     `mapstructure:"cleanFor" help:"A caller of a removed API silent this long counts as fixed, as sunset check --clean-for; 0 counts every call of gate.since."`
	Since       time.Duration     `mapstructure:"since" help:"The window of the verdict the gate asks, as upgradechecks' since: at least 1h, at most the retention."`
	RetryAfter  time.Duration     `mapstructure:"retryAfter" help:"How long Cluster API waits before it asks again about an upgrade the gate holds (retryAfterSeconds)."`
}

// defaultGate is the gate key's defaults.
func defaultGate() GateConfig {
	return GateConfig{StaleAfter: 2 * time.Hour, WhenUnknown: string(gate.Allow), Since: sunsetv1.DefaultCheckSince, RetryAfter: capihook.DefaultRetryAfter}
}

// validateGate reports what is wrong with the gate key, when the gate is
// on.
func (c Config) validateGate(bad func(key, format string, args ...any)) {
	g := c.Gate
	if !g.Enabled {
		return
	}
	if _, err := gate.NewKinds(g.Kinds); err != nil {
		bad("gate.kinds", "%v", err)
	}
	if w := gate.WhenUnknown(g.WhenUnknown); w != gate.Allow && w != gate.Refuse {
		bad("gate.whenUnknown", "%q is neither allow nor refuse", g.WhenUnknown)
	}
	if g.StaleAfter < time.Minute {
		bad("gate.staleAfter", "%s is shorter than 1m; Sunset notes what it hears of a cluster each minute", g.StaleAfter)
	}
	if g.Since < time.Hour || (c.Retention > 0 && g.Since > c.Retention) {
		bad("gate.since", "%s is not between 1h and the retention (%s)", g.Since, c.Retention)
	}
	if g.CleanFor < 0 || g.CleanFor > g.Since {
		bad("gate.cleanFor", "%s is not between 0 and gate.since (%s)", g.CleanFor, g.Since)
	}
	if g.RetryAfter < time.Second {
		bad("gate.retryAfter", "%s is shorter than 1s", g.RetryAfter)
	}
}

// mountGate serves the gate on top, outside reader authentication:
// kube-apiserver and Cluster API call it without credentials.
func (a *App) mountGate(top *http.ServeMux, reg prometheus.Registerer, now func() time.Time) error {
	cfg := a.cfg.Gate
	kinds, err := gate.NewKinds(cfg.Kinds)
	if err != nil {
		return fmt.Errorf("gate.kinds: %w", err)
	}
	// The verdict upgradechecks serve, so that the two never disagree on
	// a cluster's traffic. The server's own cluster scan stays out: it
	// is of the one cluster Sunset runs in, and would judge every
	// cluster of a fleet by its releases.
	svc := api.NewService(a.store, a.parts.Catalog, a.parts.Rules, a.parts.System.IsSystem, now)
	if a.exemptions != nil {
		svc.WithExemptions(a.exemptions)
	}
	svc.WithGateOverrides(a.store)
	g := gate.New(gate.Options{
		Checker:     gateChecker{svc: svc, webhooks: a.parts.WebhookService()},
		Listener:    heardClusters{store: a.store, agg: a.agg},
		Clusters:    cfg.Clusters,
		StaleAfter:  cfg.StaleAfter,
		WhenUnknown: gate.WhenUnknown(cfg.WhenUnknown),
		Since:       cfg.Since,
		CleanFor:    cfg.CleanFor,
		Recorder:    overrideStore{a.store},
		Logger:      a.log,
		Registerer:  reg,
		Now:         now,
	})
	admit.New(admit.Options{Gate: g, Kinds: kinds, Logger: a.log}).Register(top)
	capihook.New(capihook.Options{Gate: g, RetryAfter: cfg.RetryAfter, Logger: a.log}).Register(top)
	return nil
}

// gateChecker is the upgradechecks handler's verdict: the webhook
// servers whose certificates were flagged join it, as they join
// GET upgradechecks/<target>.
type gateChecker struct {
	svc      *api.Service
	webhooks *api.WebhookService
}

func (c gateChecker) UpgradeCheck(q sunsetv1.Query, o verdict.CheckOptions) (sunsetv1.UpgradeCheck, error) {
	list, err := c.webhooks.Webhooks(sunsetv1.WebhookQuery{Cluster: q.Cluster, Since: o.Since})
	if err != nil {
		return sunsetv1.UpgradeCheck{}, err
	}
	o.WebhookCertificates = list.Certificates
	return c.svc.UpgradeCheck(q, o)
}

// heardClusters is what the store and the aggregator's read watch have
// heard of each cluster.
type heardClusters struct {
	store *store.Store
	agg   *aggregate.Aggregator
}

func (h heardClusters) Heard(cluster string) (gate.Hearing, error) {
	all, err := h.store.LoadClusterReads()
	if err != nil {
		return gate.Hearing{}, err
	}
	r, ok := all[cluster]
	if !ok {
		return gate.Hearing{}, nil
	}
	return gate.Hearing{Known: true, LastHeard: r.LastHeard, ReadsMissing: slices.Contains(h.agg.ClustersWithoutReads(), cluster)}, nil
}

// overrideStore keeps the gate's overrides in the store, for the
// retention period.
type overrideStore struct{ store *store.Store }

func (s overrideStore) RecordOverride(o gate.OverrideRecord) error {
	return s.store.SaveGateOverride(store.GateOverride{Time: o.Time, Cluster: o.Cluster, Source: string(o.Source), Kind: o.Kind,
		Namespace: o.Meta.Namespace, Name: o.Meta.Name, User: o.User, Reason: o.Reason, From: o.From.String(), To: o.To.String()})
}
