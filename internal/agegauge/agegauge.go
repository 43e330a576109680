// Package agegauge exports how old the newest thing an input has taken is,
// per label set: sunset_source_lag_seconds and sunset_kafka_lag_seconds.
// The age is worked out at each scrape, so that an input that stops
// taking anything shows an age that grows, not one that stands still.
package agegauge

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge is a prometheus.Collector of ages, one series per expected label
// set.
type Gauge struct {
	desc *prometheus.Desc
	now  func() time.Time

	mu     sync.Mutex
	series map[string]*series
}

type series struct {
	labels []string
	// since is when the series was expected: until its first item its
	// age counts from there, so that an input that never takes anything
	// still shows.
	since, newest time.Time
	seen          bool
}

// New returns a gauge of desc's metric on the clock now.
func New(desc *prometheus.Desc, now func() time.Time) *Gauge {
	return &Gauge{desc: desc, now: now, series: map[string]*series{}}
}

func key(labels []string) string { return strings.Join(labels, "\x00") }

// Expect adds the series of labels, counting from now.
func (g *Gauge) Expect(labels ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.series[key(labels)]; !ok {
		g.series[key(labels)] = &series{labels: labels, since: g.now()}
	}
}

// Saw notes an item of the series labels taken, made at at. The newest
// only moves forward; labels that were not expected are ignored, so that
// the series stay bounded.
func (g *Gauge) Saw(at time.Time, labels ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.series[key(labels)]
	if s == nil || at.IsZero() {
		return
	}
	if !s.seen || at.After(s.newest) {
		s.newest, s.seen = at, true
	}
}

// Describe implements prometheus.Collector.
func (g *Gauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *Gauge) Collect(ch chan<- prometheus.Metric) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.series {
		t := s.since
		if s.seen {
			t = s.newest
		}
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, max(now.Sub(t), 0).Seconds(), s.labels...)
	}
}
