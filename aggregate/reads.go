package aggregate

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-sunset/sunset/cardinality"
)

// ReadsWindow is how long a cluster may send events without a single get,
// list or watch before Sunset warns that it cannot see reads. Every real
// cluster reads all the time (controllers list and watch), so a day of
// none means the audit policy or the log category drops them: AKS's
// kube-audit-admin, or GKE without Data Access logs.
const ReadsWindow = 24 * time.Hour

const readsMissingMetric = "sunset_cluster_reads_missing"

// readWatch remembers, per cluster, when Sunset first heard it and when it
// last saw a read. Both are in memory: after a restart a cluster has to be
// heard for a whole window again before it is warned about.
type readWatch struct {
	labels *cardinality.Guard
	now    func() time.Time

	mu       sync.Mutex
	clusters map[string]*heard
}

type heard struct{ first, last, lastRead time.Time }

func newReadWatch(labels *cardinality.Guard, now func() time.Time) *readWatch {
	return &readWatch{labels: labels, now: now, clusters: map[string]*heard{}}
}

// note records events from cluster, reads among them or not. Clusters are
// the guard's label values, so junk names cannot grow the map past the
// metric's bound.
func (w *readWatch) note(cluster string, read bool) {
	cluster = w.labels.Cluster(readsMissingMetric, cluster)
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.clusters[cluster]
	if h == nil {
		h = &heard{first: now}
		w.clusters[cluster] = h
	}
	h.last = now
	if read {
		h.lastRead = now
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
		if now.Sub(h.first) >= ReadsWindow && now.Sub(h.last) < ReadsWindow && now.Sub(h.lastRead) >= ReadsWindow {
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
func (a *Aggregator) noteEvents(origin Origin, events []Event) {
	if len(events) == 0 {
		return
	}
	read := slices.ContainsFunc(events, func(e Event) bool { return isRead(e.Verb) })
	a.reads.note(origin.Cluster, read)
}
