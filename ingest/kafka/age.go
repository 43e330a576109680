package kafka

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// topicAge is sunset_kafka_lag_seconds: how far behind the clock the
// newest message committed from each topic is, by the message's own time
// (what the producer, or Event Hubs, stamped on it). Worked out at each
// scrape, it grows while a topic brings nothing, which a lag in messages
// cannot show: a stalled shipper leaves no messages to lag behind.
type topicAge struct {
	now func() time.Time

	mu sync.Mutex
	// since is when Sunset started, for each configured topic; newest is
	// the newest message's time, once one is committed.
	since, newest map[string]time.Time
}

var topicAgeDesc = prometheus.NewDesc("sunset_kafka_lag_seconds",
	"Now minus the time of the newest message committed from a topic (before the first, since Sunset started); it grows while the topic brings nothing.",
	[]string{"topic"}, nil)

// newTopicAge starts every configured topic's series at now, so that one
// that never brings a message still shows.
func newTopicAge(topics []string, now func() time.Time) *topicAge {
	a := &topicAge{now: now, since: map[string]time.Time{}, newest: map[string]time.Time{}}
	for _, t := range topics {
		a.since[t] = now()
	}
	return a
}

// saw notes a committed message's time; it only moves forward, and only
// for configured topics.
func (a *topicAge) saw(topic string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.since[topic]; ok && at.After(a.newest[topic]) {
		a.newest[topic] = at
	}
}

// Describe implements prometheus.Collector.
func (a *topicAge) Describe(ch chan<- *prometheus.Desc) { ch <- topicAgeDesc }

// Collect implements prometheus.Collector.
func (a *topicAge) Collect(ch chan<- prometheus.Metric) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for topic, since := range a.since {
		t, ok := a.newest[topic]
		if !ok {
			t = since
		}
		ch <- prometheus.MustNewConstMetric(topicAgeDesc, prometheus.GaugeValue, max(now.Sub(t), 0).Seconds(), topic)
	}
}
