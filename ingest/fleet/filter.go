package fleet

import (
	"context"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/ingest/kafka"
)

// filter is the ingester of the filter role's Kafka consumer: instead of
// counting a batch of audit events it classifies them and produces the
// requests that count to the fleet's topic. The consumer commits the
// batch's offsets to its group only once that produce is acknowledged.
type filter struct {
	agg Aggregator
	pub *publisher
}

var (
	_ kafka.BatchIngester    = (*filter)(nil)
	_ kafka.PrefilterCounter = (*filter)(nil)
)

// IngestBatch produces the requests of a whole batch in one round trip.
// The cursor is not stored: the group's offset is the filter's position.
func (f *filter) IngestBatch(ctx context.Context, origins []*kafka.OriginEvents, _ aggregate.Cursor) error {
	var reqs []aggregate.Request
	for _, g := range origins {
		r, _ := f.agg.Classify(g.Origin, g.Events)
		reqs = append(reqs, r...)
	}
	return f.pub.publish(ctx, roleFilter, reqs)
}

// IngestAt produces the requests of events.
func (f *filter) IngestAt(ctx context.Context, origin aggregate.Origin, events []aggregate.Event, _ ...aggregate.Cursor) (aggregate.Summary, error) {
	reqs, sum := f.agg.Classify(origin, events)
	return sum, f.pub.publish(ctx, roleFilter, reqs)
}

// CountInvalid records events that could not be decoded.
func (f *filter) CountInvalid(source string, n int) { f.agg.CountInvalid(source, n) }

// CountPrefiltered counts the events the pre-filter set aside, as
// Classify would have.
func (f *filter) CountPrefiltered(source string, p aggregate.Prefiltered) {
	f.agg.CountPrefiltered(source, p)
}

// HeardReads notes reads set aside undecoded; see aggregate.HeardReads.
func (f *filter) HeardReads(cluster string, read bool) { f.agg.HeardReads(cluster, read) }

// noCursors makes the filter's consumer start every partition from its
// group's committed offset: nothing of the audit topics is stored here.
type noCursors struct{}

func (noCursors) Cursor(string) ([]byte, bool, error) { return nil, false, nil }
