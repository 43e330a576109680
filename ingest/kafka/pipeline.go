package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

func (c *Consumer) consumePartition(ctx context.Context, oc *offsetCommitter, topic string, pa kafkago.PartitionAssignment) {
	log := c.log.With().Str("topic", topic).Int("partition", pa.ID).Logger()
	start, err := c.startOffset(topic, pa)
	if err != nil {
		log.Error().Err(err).Msg("reading the stored offset; the partition is not consumed in this generation")
		return
	}
	r := NewPartitionReader(c.cfg, c.dialer, topic, pa.ID, log)
	defer func() { _ = r.Close() }()
	if err := r.SetOffset(start); err != nil {
		log.Error().Err(err).Int64("offset", start).Msg("seeking")
		return
	}
	log.Debug().Int64("offset", start).Msg("consuming partition")
	if start > pa.Offset {
		// Killed after its own commit and before the group's: the group
		// learns the position now, not only when more messages come.
		oc.note(topic, pa.ID, start)
	}
	p := &partition{c: c, offsets: oc, topic: topic, id: pa.ID, label: strconv.Itoa(pa.ID), cursor: c.cursorName(topic, pa.ID)}
	runPartition(ctx, r, c.cfg, log, stages[batch]{prepare: p.prepare, merge: mergeBatches, commit: p.commit, skip: p.skip, depth: commitQueueDepth})
	// The group learns where this member stopped before the partition
	// can go to another one.
	_ = oc.flush()
}

// commitQueueDepth is how many decoded batches of a partition may wait for
// their commit before fetching waits too. A decoded batch holds only the
// events that may count, so this is cheap.
const commitQueueDepth = 32

// partition is one partition being consumed in a generation.
type partition struct {
	c                    *Consumer
	offsets              *offsetCommitter
	topic, label, cursor string
	id                   int
}

// commit counts a batch and commits its end position with the counts,
// then tells the group. What the batch's messages were is told (metrics,
// poison samples) once it is committed, so a batch read again after a
// failed commit is not told twice. When the ingester says part of the
// batch can never be stored (countkey.ErrUnstorable), its messages are
// committed apart and those that cannot be stored alone are poison
// (ReasonUnstorable): the partition moves past them.
func (p *partition) commit(ctx context.Context, b *batch) error {
	c := p.c
	start := time.Now()
	cursor := p.position(b.next)
	origins := b.origins
	if len(origins) == 0 {
		origins = []*OriginEvents{{Origin: classify.Origin{Source: Source, Node: c.cfg.Node, Cluster: c.defaultCluster}}}
	}
	if err := c.ingest(ctx, origins, cursor); err != nil {
		if !errors.Is(err, countkey.ErrUnstorable) {
			return err
		}
		// Retrying cannot store something of the batch: commit its
		// messages apart, down to those that cannot be stored even
		// alone, which are poison, and then the position past them all.
		c.log.Warn().Err(err).Str("topic", p.topic).Int("partition", p.id).Int("messages", len(b.records)).
			Msg("a batch cannot be stored; committing its messages apart to find those at fault")
		if err := p.split(ctx, b, b.records); err != nil {
			return err
		}
		if err := c.ingest(ctx, []*OriginEvents{{Origin: classify.Origin{Source: Source, Node: c.cfg.Node, Cluster: c.defaultCluster}}}, cursor); err != nil {
			return err
		}
	}
	if b.invalid > 0 {
		c.tallies.CountInvalid(Source, b.invalid)
	}
	if b.skipped != (classify.Prefiltered{}) {
		c.tallies.CountPrefiltered(Source, b.skipped)
		for _, h := range b.heard {
			c.tallies.HeardReads(h.cluster, h.read)
		}
	}
	if b.ok > 0 {
		c.metrics.messages.WithLabelValues(p.topic, "ok").Add(float64(b.ok))
	}
	for _, ps := range b.poison {
		c.recordPoison(ps)
	}
	c.age.Saw(b.newest, p.topic)
	p.offsets.note(p.topic, p.id, b.next)
	c.metrics.commitDuration.Observe(time.Since(start).Seconds())
	if b.lag >= 0 {
		c.metrics.lag.WithLabelValues(p.topic, p.label).Set(float64(b.lag))
	}
	// Once counts, metrics and the position are all told: a test waits
	// for this line rather than asking again and again.
	c.log.Debug().Str("topic", p.topic).Int("partition", p.id).Int64("next", b.next).Msg("batch committed")
	return nil
}

// ReasonUnstorable is the poison reason of a message whose events the
// ingester refuses to store even alone, with an error that says retrying
// cannot help (countkey.ErrUnstorable): the partition moves past it
// rather than read it again for ever.
const ReasonUnstorable = "unstorable"

// isolate commits the events of recs, messages of b, with the position
// after the last; when they cannot be stored, each half apart (split).
func (p *partition) isolate(ctx context.Context, b *batch, recs []record) error {
	err := p.c.ingest(ctx, recordOrigins(recs), p.position(recs[len(recs)-1].offset+1))
	if err == nil || !errors.Is(err, countkey.ErrUnstorable) {
		return err
	}
	return p.split(ctx, b, recs)
}

// split commits each half of recs, messages of b that cannot be stored
// together, apart (isolate), in order; a message alone is poison.
func (p *partition) split(ctx context.Context, b *batch, recs []record) error {
	switch len(recs) {
	case 0:
		return nil
	case 1:
		r := recs[0]
		p.c.log.Warn().Str("topic", p.topic).Int("partition", p.id).Int64("offset", r.offset).
			Msg("skipping a message that can never be stored")
		b.ok--
		b.poison = append(b.poison, PoisonSample{Reason: ReasonUnstorable, Topic: p.topic, Partition: p.id, Offset: r.offset, Messages: 1, Time: time.Now().UTC()})
		return nil
	}
	half := len(recs) / 2
	if err := p.isolate(ctx, b, recs[:half]); err != nil {
		return err
	}
	return p.isolate(ctx, b, recs[half:])
}

// position is the cursor of the partition at next.
func (p *partition) position(next int64) countkey.Cursor {
	return countkey.Cursor{Name: p.cursor, Value: binary.BigEndian.AppendUint64(nil, uint64(next))}
}

// recordOrigins are the events of recs by origin, in order: consecutive
// messages of one origin share one.
func recordOrigins(recs []record) []*OriginEvents {
	type span struct {
		group  *OriginEvents
		lo, hi int
	}
	var spans []span
	for _, r := range recs {
		if n := len(spans); n > 0 && spans[n-1].group == r.group && spans[n-1].hi == r.lo {
			spans[n-1].hi = r.hi
			continue
		}
		spans = append(spans, span{r.group, r.lo, r.hi})
	}
	out := make([]*OriginEvents, len(spans))
	for i, s := range spans {
		// Capped, so that nothing appended to it writes into the batch.
		out[i] = &OriginEvents{Origin: s.group.Origin, Events: s.group.Events[s.lo:s.hi:s.hi]}
	}
	return out
}

// ingest hands a batch's origins to the ingester, in one call when it takes
// whole batches.
func (c *Consumer) ingest(ctx context.Context, origins []*OriginEvents, cursor countkey.Cursor) error {
	if c.batch != nil {
		return c.batch.IngestBatch(ctx, origins, cursor)
	}
	// The position goes with the last origin: earlier origins committed
	// without it are recognised as duplicates if the batch is re-read.
	for i, g := range origins {
		var cursors []countkey.Cursor
		if i == len(origins)-1 {
			cursors = []countkey.Cursor{cursor}
		}
		if _, err := c.ingester.IngestAt(ctx, g.Origin, g.Events, cursors...); err != nil {
			return err
		}
	}
	return nil
}
