package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/backoff"
)

// outboxPrefix starts the store cursor names of outbox entries.
const outboxPrefix = "fleet-outbox/"

// outboxBatch bounds how many outbox entries one produce takes.
const outboxBatch = 64

// Forwarder counts events from the webhook and files as the aggregator
// does and also sends the requests that count to the fleet's topic, so
// that other replicas count them too.
//
// It does not produce while the sender waits: the requests go into an
// outbox in the same badger transaction as their counts, and a loop
// produces the outbox to Kafka and then empties it. So the webhook answers
// as fast as without forwarding, a Kafka outage only delays forwarding, and
// a crash loses nothing: what was committed is forwarded after the restart,
// at least once (counting replicas drop the copies).
type Forwarder struct {
	agg     Aggregator
	store   Store
	pub     *publisher
	log     zerolog.Logger
	metrics *metrics
	// run makes outbox names unique across restarts without reading the
	// store; seq orders them within a run.
	run  string
	seq  atomic.Uint64
	wake chan struct{}
}

func newForwarder(agg Aggregator, st Store, pub *publisher, log zerolog.Logger, m *metrics) *Forwarder {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &Forwarder{agg: agg, store: st, pub: pub, log: log, metrics: m,
		run: fmt.Sprintf("%020d-%s", time.Now().UnixNano(), hex.EncodeToString(b)), wake: make(chan struct{}, 1)}
}

// Ingest counts events and queues their requests for forwarding.
func (f *Forwarder) Ingest(ctx context.Context, origin classify.Origin, events []classify.Event) (classify.Summary, error) {
	return f.IngestAt(ctx, origin, events)
}

// IngestAt is Ingest that also commits input positions with the counts.
func (f *Forwarder) IngestAt(ctx context.Context, origin classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	reqs, sum := f.agg.Classify(origin, events)
	if len(reqs) > 0 {
		recs := make([]record, len(reqs))
		for i, r := range reqs {
			recs[i] = toRecord(r)
		}
		value, err := json.Marshal(recs)
		if err != nil {
			return sum, err
		}
		name := fmt.Sprintf("%s%s-%012d", outboxPrefix, f.run, f.seq.Add(1))
		cursors = append(cursors, countkey.Cursor{Name: name, Value: value})
	}
	applied, err := f.agg.Apply(ctx, origin.Source, reqs, cursors...)
	sum.Add(applied)
	if err == nil && len(reqs) > 0 {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
	return sum, err
}

// Plan is the aggregator's dry run; nothing is forwarded.
func (f *Forwarder) Plan(origin classify.Origin, events []classify.Event) ([]aggregate.Planned, error) {
	return f.agg.Plan(origin, events)
}

// drain produces the outbox until ctx is done, retrying with backoff from 1s
// to 30s while Kafka fails. What is left when it stops stays in the store
// for the next start.
func (f *Forwarder) drain(ctx context.Context) {
	retry := backoff.New(time.Second, 30*time.Second)
	for {
		sent, err := f.drainOnce(ctx)
		if n, cerr := f.store.CountCursors(outboxPrefix); cerr == nil {
			f.metrics.outbox.Set(float64(n))
		}
		if err == nil && sent > 0 {
			f.log.Debug().Int("batches", sent).Msg("forwarded outbox batches to the fleet's topic")
		}
		var wait <-chan time.Time
		switch {
		case err != nil && ctx.Err() == nil:
			pause := retry.Next()
			f.log.Error().Err(err).Dur("retry_in", pause).Msg("forwarding requests to the fleet's topic failed; they stay in the outbox")
			wait = time.After(pause)
		case err == nil && sent == outboxBatch:
			continue // more is waiting
		default:
			retry.Reset()
		}
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-wait:
		}
	}
}

// drainOnce produces up to outboxBatch entries and removes them from the
// outbox once acknowledged.
func (f *Forwarder) drainOnce(ctx context.Context) (int, error) {
	var reqs []countkey.Request
	var names []string
	err := f.store.ScanCursors(outboxPrefix, outboxBatch, func(name string, value []byte) error {
		names = append(names, name)
		var recs []record
		if err := json.Unmarshal(value, &recs); err != nil {
			// Written by this code in the same transaction as counts; a
			// broken entry cannot be repaired by retrying.
			f.log.Error().Err(err).Str("entry", name).Msg("dropping an unreadable outbox entry")
			return nil
		}
		for _, rec := range recs {
			reqs = append(reqs, rec.request())
		}
		return nil
	})
	if err != nil || len(names) == 0 {
		return 0, err
	}
	if err := f.pub.publish(ctx, roleForward, reqs); err != nil {
		return 0, err
	}
	return len(names), f.store.DeleteCursors(names...)
}
