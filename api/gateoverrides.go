package api

import (
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/verdict"
)

// GateOverrideReader reads the overrides the upgrade gate kept;
// *store.Store implements it.
type GateOverrideReader interface {
	GateOverrides(cluster string, since time.Time) ([]store.GateOverride, error)
}

// WithGateOverrides makes every upgrade check show the upgrades the gate
// let through by override in its window.
func (s *Service) WithGateOverrides(r GateOverrideReader) { s.overrides = r }

// gateOverrides are the overrides an upgrade check over q and o shows:
// those of q's cluster (of every cluster without one) in o's window.
func (s *Service) gateOverrides(q sunsetv1.Query, o verdict.CheckOptions) ([]sunsetv1.GateOverride, error) {
	if s.overrides == nil {
		return nil, nil
	}
	list, err := GateOverrides(s.overrides, q.Cluster, o.Since, o.Now)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return list, nil
}

// GateOverrides are the upgrades of cluster (of every cluster if empty)
// the gate let through by override in the since before now, newest
// first, as an upgrade check shows them.
func GateOverrides(r GateOverrideReader, cluster string, since time.Duration, now time.Time) ([]sunsetv1.GateOverride, error) {
	kept, err := r.GateOverrides(cluster, now.Add(-since))
	if err != nil {
		return nil, err
	}
	out := make([]sunsetv1.GateOverride, 0, len(kept))
	for _, o := range kept {
		out = append(out, sunsetv1.GateOverride{Time: o.Time, Cluster: o.Cluster, Source: o.Source, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
			User: o.User, Reason: o.Reason, From: o.From, To: o.To})
	}
	return out, nil
}
