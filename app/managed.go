package app

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/eks"
	"github.com/kube-sunset/sunset/ingest/gke"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/internal/agegauge"
)

// managedSource is a managed control plane's audit log source: EKS through
// CloudWatch Logs, GKE through Pub/Sub.
type managedSource struct {
	// kind is the source's name (eks, gke), as in its warnings and its
	// component's name.
	kind, cluster string
	run           func(ctx context.Context) error
	ready         func() (bool, string)
}

// buildManaged builds the managed-cluster sources. What they count goes
// through local, so that kafka.forward sends it to the fleet; prefilter,
// when the decoder is the pre-filter, sets aside what cannot count.
func (a *App) buildManaged(local sink.Ingester, prefilter *auditjson.Prefilter, reg prometheus.Registerer, now func() time.Time) error {
	lag := agegauge.New(sourceLagDesc, now)
	if len(a.cfg.Ingest.EKS)+len(a.cfg.Ingest.GKE) > 0 {
		reg.MustRegister(lag)
	}
	for _, c := range a.cfg.Ingest.EKS {
		src, err := eks.New(eks.Options{Config: c.WithDefaults(), Ingester: local, Tallies: a.agg, Cursors: a.store, Logger: a.log,
			Registerer: reg, Newest: newestOf(lag, eks.SourceName), Now: now, Prefilter: prefilter})
		if err != nil {
			return fmt.Errorf("ingest.eks %s: %w", c.Cluster, err)
		}
		a.managed = append(a.managed, managedSource{kind: eks.SourceName, cluster: c.Cluster, run: src.Run, ready: src.Ready})
		lag.Expect(eks.SourceName, c.Cluster)
		if _, ok := a.cfg.ClusterVersions()[c.Cluster]; !ok {
			a.log.Warn().Str("cluster", c.Cluster).Msg("EKS cuts audit entries over 256 KB, and a cut entry counts as deprecated only by the catalog, which needs the cluster's version: set clusters." + c.Cluster + ".version")
		}
	}
	for _, c := range a.cfg.Ingest.GKE {
		src, err := gke.New(context.Background(), gke.Options{Config: c, Ingester: local, Tallies: a.agg, Logger: a.log,
			Registerer: reg, Newest: newestOf(lag, gke.SourceName), Prefilter: prefilter})
		if err != nil {
			return fmt.Errorf("ingest.gke %s: %w", c.Cluster, err)
		}
		a.managed = append(a.managed, managedSource{kind: gke.SourceName, cluster: c.Cluster, run: src.Run, ready: src.Ready})
		lag.Expect(gke.SourceName, c.Cluster)
	}
	return nil
}

// newestOf is what a source of kind calls with its newest event's time.
func newestOf(lag *agegauge.Gauge, kind string) func(cluster string, t time.Time) {
	return func(cluster string, t time.Time) { lag.Saw(t, kind, cluster) }
}

// managedWarnings say which managed sources cannot read, and why. They
// are warnings, not unreadiness: a pod taken out of its Service for one
// cloud's missing permission would cost the webhook's clusters their
// batches.
func (a *App) managedWarnings() []string {
	var out []string
	for _, m := range a.managed {
		if ready, why := m.ready(); !ready {
			why = strings.TrimPrefix(why, m.kind+" "+m.cluster+": ")
			out = append(out, fmt.Sprintf("%s cluster %s cannot read: %s", m.kind, m.cluster, cmp.Or(why, "it has not read yet")))
		}
	}
	return out
}
