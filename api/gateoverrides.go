package api

import (
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/store"
)

// GateOverrideReader reads the overrides the upgrade gate kept;
// *store.Store implements it.
type GateOverrideReader interface {
	GateOverrides(cluster string, since time.Time) ([]store.GateOverride, error)
}

// GateOverrides are the upgrades of cluster the gate let through by
// override in the since before now, newest first, as an upgrade check
// shows them.
func GateOverrides(r GateOverrideReader, cluster string, since time.Duration, now time.Time) ([]sunsetv1.GateOverride, error) {
	kept, err := r.GateOverrides(cluster, now.Add(-since))
	if err != nil {
		return nil, err
	}
	out := make([]sunsetv1.GateOverride, 0, len(kept))
	for _, o := range kept {
		out = append(out, sunsetv1.GateOverride{Time: o.Time, Source: o.Source, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
			User: o.User, Reason: o.Reason, From: o.From, To: o.To})
	}
	return out, nil
}
