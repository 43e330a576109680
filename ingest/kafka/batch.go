package kafka

import (
	"cmp"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/classify"
)

// batch is what one or more consecutive fetched batches of a partition
// hold once decoded: the events that may count, grouped by origin, and what
// the rest were.
type batch struct {
	origins  []*OriginEvents
	byOrigin map[classify.Origin]*OriginEvents
	// next is the offset after the last message; lag what the broker
	// still held after it, -1 when unknown (a skipped batch).
	next, lag int64
	ok        int
	invalid   int
	skipped   classify.Prefiltered
	// heard are the clusters of the events set aside, and whether any of
	// them read.
	heard  []heardCluster
	poison []PoisonSample
	// newest is the latest time stamped on a message of the batch.
	newest time.Time
	// records are the messages with events, in order, and where their
	// events are in origins: to find the one at fault when the batch
	// cannot be stored (pipeline.go).
	records []record
}

// record is where the events of one message are in a batch.
type record struct {
	offset int64
	group  *OriginEvents
	lo, hi int // its events: group.Events[lo:hi]
}

type heardCluster struct {
	cluster string
	read    bool
}

// addHeard notes a cluster whose events were set aside; a batch holds few.
func (b *batch) addHeard(cluster string, read bool) {
	for i := range b.heard {
		if b.heard[i].cluster == cluster {
			b.heard[i].read = b.heard[i].read || read
			return
		}
	}
	b.heard = append(b.heard, heardCluster{cluster, read})
}

// prepare decodes a fetched batch; it runs as batches are fetched.
func (p *partition) prepare(msgs []kafkago.Message) *batch {
	c := p.c
	b := &batch{}
	for i := range msgs {
		m := &msgs[i]
		if m.Time.After(b.newest) {
			b.newest = m.Time
		}
		var d decoded
		reason := ""
		if int64(len(m.Value)) > maxDecompressed.Load() {
			// An uncompressed message over the bound of a decompressed
			// batch is poison as well.
			reason = ReasonTooLarge
		} else {
			d, reason = c.decoder.decode(m.Value)
		}
		cluster, allowed := c.clusterOf(m, d.cluster)
		if reason == "" && !allowed {
			reason = ReasonClusterNotAllowed
		}
		if reason != "" {
			b.poison = append(b.poison, PoisonSample{Reason: reason, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Messages: 1, Time: time.Now().UTC()})
			continue
		}
		b.ok++
		b.invalid += d.invalid
		b.skipped.Merge(d.skipped)
		if len(d.events) == 0 && d.skipped == (classify.Prefiltered{}) {
			continue
		}
		o := classify.Origin{Source: Source, Node: c.cfg.Node}
		o.Node = cmp.Or(header(m, c.cfg.NodeHeader), d.node, o.Node)
		o.Cluster = cluster
		if d.skipped != (classify.Prefiltered{}) {
			b.addHeard(o.Cluster, d.skipped.Reads > 0)
		}
		if len(d.events) > 0 {
			g, lo := b.add(o, d.events)
			b.records = append(b.records, record{offset: m.Offset, group: g, lo: lo, hi: len(g.Events)})
		}
	}
	last := msgs[len(msgs)-1]
	b.next = last.Offset + 1
	b.lag = max(last.HighWaterMark-b.next, 0)
	if c.prepared != nil {
		c.prepared(p.topic, p.id, b.next)
	}
	return b
}

// skip stands for the messages from first to next (excluded): a record
// batch that decompresses to more than kafka.maxDecompressedBytes. It is
// poison, and its commit moves the partition past it.
func (p *partition) skip(first, next int64) *batch {
	b := &batch{next: next, lag: -1, poison: []PoisonSample{{Reason: ReasonTooLarge, Topic: p.topic, Partition: p.id,
		Offset: first, Messages: next - first, Time: time.Now().UTC()}}}
	if p.c.prepared != nil {
		p.c.prepared(p.topic, p.id, b.next)
	}
	return b
}

// add appends events of origin o, and returns their group and where
// in it they start.
func (b *batch) add(o classify.Origin, events []classify.Event) (*OriginEvents, int) {
	if b.byOrigin == nil {
		b.byOrigin = map[classify.Origin]*OriginEvents{}
	}
	g := b.byOrigin[o]
	if g == nil {
		g = &OriginEvents{Origin: o}
		b.byOrigin[o] = g
		b.origins = append(b.origins, g)
	}
	lo := len(g.Events)
	g.Events = append(g.Events, events...)
	return g, lo
}

// mergeBatches appends next, the batch that follows, to into.
func mergeBatches(into, next *batch) {
	type moved struct {
		group *OriginEvents
		lo    int
	}
	to := make(map[*OriginEvents]moved, len(next.origins))
	for _, g := range next.origins {
		ig, lo := into.add(g.Origin, g.Events)
		to[g] = moved{ig, lo}
	}
	for _, r := range next.records {
		m := to[r.group]
		into.records = append(into.records, record{offset: r.offset, group: m.group, lo: m.lo + r.lo, hi: m.lo + r.hi})
	}
	into.next = next.next
	if next.newest.After(into.newest) {
		into.newest = next.newest
	}
	if next.lag >= 0 {
		into.lag = next.lag
	}
	into.ok += next.ok
	into.invalid += next.invalid
	into.skipped.Merge(next.skipped)
	for _, h := range next.heard {
		into.addHeard(h.cluster, h.read)
	}
	into.poison = append(into.poison, next.poison...)
}

func header(m *kafkago.Message, name string) string {
	if name == "" {
		return ""
	}
	for _, h := range m.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}
