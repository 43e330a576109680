package app

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sourceLag is sunset_source_lag_seconds: how far behind the clock each
// managed cluster's newest event is. The sources tell it their newest
// event's time; the lag is worked out at each scrape, so that a source
// that stops reading shows a lag that grows, not one that stands still.
type sourceLag struct {
	now func() time.Time

	mu     sync.Mutex
	newest map[sourceCluster]time.Time
	// since is when each source was built: until its first event its lag
	// counts from there, so that one that never reads still shows.
	since map[sourceCluster]time.Time
}

type sourceCluster struct{ source, cluster string }

var sourceLagDesc = prometheus.NewDesc("sunset_source_lag_seconds",
	"Now minus the time of the newest event a managed-cluster source (eks, gke) has read, per cluster, or since Sunset started until the first; it grows while the source reads nothing.",
	[]string{"source", "cluster"}, nil)

func newSourceLag(now func() time.Time) *sourceLag {
	return &sourceLag{now: now, newest: map[sourceCluster]time.Time{}, since: map[sourceCluster]time.Time{}}
}

// expect adds a series for a source before its first event.
func (l *sourceLag) expect(source, cluster string) {
	l.mu.Lock()
	l.since[sourceCluster{source, cluster}] = l.now()
	l.mu.Unlock()
}

// observer is what a source calls with its newest event's time.
func (l *sourceLag) observer(source string) func(cluster string, t time.Time) {
	return func(cluster string, t time.Time) {
		k := sourceCluster{source, cluster}
		l.mu.Lock()
		if t.After(l.newest[k]) {
			l.newest[k] = t
		}
		l.mu.Unlock()
	}
}

// Describe implements prometheus.Collector.
func (l *sourceLag) Describe(ch chan<- *prometheus.Desc) { ch <- sourceLagDesc }

// Collect implements prometheus.Collector.
func (l *sourceLag) Collect(ch chan<- prometheus.Metric) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, since := range l.since {
		t, read := l.newest[k]
		if !read {
			t = since
		}
		ch <- prometheus.MustNewConstMetric(sourceLagDesc, prometheus.GaugeValue, now.Sub(t).Seconds(), k.source, k.cluster)
	}
}
