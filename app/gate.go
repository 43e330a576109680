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
