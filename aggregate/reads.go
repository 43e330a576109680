package aggregate

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/store"
)

// ReadsWindow is how long a cluster may send events without a single get,
// list or watch before Sunset warns that it cannot see reads. Every real
// cluster reads all the time (controllers list and watch), so a day of
// none means the audit policy or the log category drops them: AKS's
// kube-audit-admin, or GKE without Data Access logs.
const ReadsWindow = 24 * time.Hour

const readsMissingMetric = "sunset_cluster_reads_missing"

// readsSaveInterval is how often, at most, a cluster's record is written
// again while it keeps sending. The record is written on the ingest path,
// in a small transaction of its own rather than with the counts: the
// warning is advisory, so a crash may lose the last minute of it (a
// cluster heard or a read seen up to a minute late), which moves the
// warning by as much, and costs one synced write per cluster and minute.
const readsSaveInterval = time.Minute

// readWatch remembers, per cluster, when Sunset first heard it, when it
// last heard it and when it last saw a read. It keeps them in the store
// too, and reads them back when built, so that a restart does not start
// the day over: the warning comes a day after reads went missing, however
// often the process restarted in between.
type readWatch struct {
	labels *cardinality.Guard
	now    func() time.Time
	store  *store.Store
	log    zerolog.Logger

	mu       sync.Mutex
	clusters map[string]*heard
	// failing is set while saving records fails, so that the failure is
	// logged once, not at every cluster and minute.
	failing bool

	// saveMu serialises saves, so that a record is never overwritten by
	// an older one: each save reads the cluster's state once it holds it.
	saveMu sync.Mutex
}

type heard struct {
	store.ClusterReads
	// saved is when the record was last handed to the store, zero when
	// never; savedRead is the LastRead it was handed.
	saved, savedRead time.Time
}

// newReadWatch builds the watch, with what st remembers of every cluster;
// st may be nil (a dry run), and then nothing is remembered.
func newReadWatch(labels *cardinality.Guard, now func() time.Time, st *store.Store, log zerolog.Logger) *readWatch {
	w := &readWatch{labels: labels, now: now, store: st, log: log, clusters: map[string]*heard{}}
	if st == nil {
		return w
	}
	saved, err := st.LoadClusterReads()
	if err != nil {
		// The warning then comes a day after this start, as it did
		// before records were kept: not a reason to stay down.
		log.Warn().Err(err).Msg("could not read what the store remembers of clusters' reads; each cluster is heard afresh")
		return w
	}
	for name, r := range saved {
		// The guard bounds the map as it bounds the metric's series.
		name = labels.Cluster(readsMissingMetric, name)
		if h := w.clusters[name]; h != nil {
			r = mergeHeard(h.ClusterReads, r)
		}
		w.clusters[name] = &heard{ClusterReads: r, savedRead: r.LastRead}
	}
	return w
}

// mergeHeard is what two records of clusters folded into one label value
// say together.
func mergeHeard(a, b store.ClusterReads) store.ClusterReads {
	if b.FirstHeard.Before(a.FirstHeard) {
		a.FirstHeard = b.FirstHeard
	}
	if b.LastHeard.After(a.LastHeard) {
		a.LastHeard = b.LastHeard
	}
	if b.LastRead.After(a.LastRead) {
		a.LastRead = b.LastRead
	}
	return a
}

// note records events from cluster, reads among them or not. Clusters are
// the guard's label values, so junk names cannot grow the map past the
// metric's bound. The cluster's record is saved when it is new, when a
// read ends a day without one (so that a restart does not warn about a
// cluster that reads again), and otherwise at most every
// readsSaveInterval.
func (w *readWatch) note(cluster string, read bool) {
	cluster = w.labels.Cluster(readsMissingMetric, cluster)
	now := w.now()
	w.mu.Lock()
	h := w.clusters[cluster]
	if h == nil {
		h = &heard{ClusterReads: store.ClusterReads{FirstHeard: now}}
		w.clusters[cluster] = h
	}
	h.LastHeard = now
	if read {
		h.LastRead = now
	}
	due := w.store != nil && (h.saved.IsZero() || now.Sub(h.saved) >= readsSaveInterval ||
		(read && now.Sub(h.savedRead) >= ReadsWindow))
	if due {
		// Claimed here, so that concurrent notes do not all save, nor
		// does every note while saving fails.
		h.saved, h.savedRead = now, h.LastRead
	}
	w.mu.Unlock()
	if due {
		w.save(cluster)
	}
}

// save writes cluster's record as it is now.
func (w *readWatch) save(cluster string) {
	w.saveMu.Lock()
	defer w.saveMu.Unlock()
	w.mu.Lock()
	r := w.clusters[cluster].ClusterReads
	w.mu.Unlock()
	err := w.store.SaveClusterReads(cluster, r)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		// The first note readsSaveInterval on tries again.
		if !w.failing {
			w.failing = true
			w.log.Warn().Err(err).Str("cluster", cluster).
				Msg("could not save what was heard of a cluster's reads; retrying each minute, and a restart meanwhile resumes from what was saved last")
		}
		return
	}
	if w.failing {
		w.failing = false
		w.log.Info().Msg("saving what is heard of clusters' reads again")
	}
}

// missing lists, sorted, the clusters heard for at least ReadsWindow, and
// within it, that sent no read within it. A cluster that has gone quiet
// is not one whose reads are missing.
func (w *readWatch) missing() []string {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for c, h := range w.clusters {
		if now.Sub(h.FirstHeard) >= ReadsWindow && now.Sub(h.LastHeard) < ReadsWindow && now.Sub(h.LastRead) >= ReadsWindow {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// Describe implements prometheus.Collector.
func (w *readWatch) Describe(ch chan<- *prometheus.Desc) { ch <- readsMissingDesc }

// Collect implements prometheus.Collector: 1 for each cluster that sends
// no reads, 0 for the others.
func (w *readWatch) Collect(ch chan<- prometheus.Metric) {
	missing := w.missing()
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.clusters {
		v := 0.0
		if _, found := slices.BinarySearch(missing, c); found {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(readsMissingDesc, prometheus.GaugeValue, v, c)
	}
}

var readsMissingDesc = prometheus.NewDesc(readsMissingMetric,
	"1 when a cluster has sent events for a day and not one get, list or watch: its audit policy or log category drops reads, so deprecated reads cannot be seen.",
	[]string{"cluster"}, nil)

// isRead reports whether verb reads.
func isRead(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }

// HeardReads notes that cluster sent events that an ingest path set aside
// undecoded, reads among them when read is true.
func (a *Aggregator) HeardReads(cluster string, read bool) { a.reads.note(cluster, read) }

// ClustersWithoutReads lists the clusters heard for a day that sent no
// get, list or watch in it.
func (a *Aggregator) ClustersWithoutReads() []string { return a.reads.missing() }

// noteEvents notes a batch of decoded events from origin.
func (a *Aggregator) noteEvents(origin classify.Origin, events []classify.Event) {
	if len(events) == 0 {
		return
	}
	read := slices.ContainsFunc(events, func(e classify.Event) bool { return isRead(e.Verb) })
	a.reads.note(origin.Cluster, read)
}
