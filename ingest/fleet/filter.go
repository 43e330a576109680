package fleet

import (
	"context"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/ingest/sink"
)

// filter is the ingester of the filter role's Kafka consumer: instead of
// counting a batch of audit events it classifies them and produces the
// requests that count to the fleet's topic. The consumer commits the
// batch's offsets to its group only once that produce is acknowledged.
type filter struct {
	tallies
	pub *publisher
}

var (
	_ kafka.BatchIngester   = (*filter)(nil)
	_ sink.PrefilterCounter = (*filter)(nil)
)

// IngestBatch produces the requests of a whole batch in one round trip.
// The cursor is not stored: the group's offset is the filter's position.
func (f *filter) IngestBatch(ctx context.Context, origins []*kafka.OriginEvents, _ countkey.Cursor) error {
	var reqs []countkey.Request
	for _, g := range origins {
		r, _ := f.agg.Classify(g.Origin, g.Events)
		reqs = append(reqs, r...)
	}
	return f.pub.publish(ctx, roleFilter, reqs)
}

// IngestAt produces the requests of events.
func (f *filter) IngestAt(ctx context.Context, origin classify.Origin, events []classify.Event, _ ...countkey.Cursor) (classify.Summary, error) {
	reqs, sum := f.agg.Classify(origin, events)
	return sum, f.pub.publish(ctx, roleFilter, reqs)
}

// tallies passes to the aggregator what an ingest path tells of the
// events it counts no request for: the filter and the forwarder tally
// them as the aggregator would.
type tallies struct{ agg Aggregator }

// CountInvalid records events that could not be decoded.
func (t tallies) CountInvalid(source string, n int) { t.agg.CountInvalid(source, n) }

// CountPrefiltered counts events set aside undecoded because they cannot
// count.
func (t tallies) CountPrefiltered(source string, p classify.Prefiltered) {
	t.agg.CountPrefiltered(source, p)
}

// HeardReads notes reads set aside undecoded; see aggregate.HeardReads.
func (t tallies) HeardReads(cluster string, read bool) { t.agg.HeardReads(cluster, read) }

// CountDecodeError counts lines or bodies that were not audit events.
func (t tallies) CountDecodeError(source, reason string, n int) {
	t.agg.CountDecodeError(source, reason, n)
}

// noCursors makes the filter's consumer start every partition from its
// group's committed offset: nothing of the audit topics is stored here.
type noCursors struct{}

func (noCursors) Cursor(string) ([]byte, bool, error) { return nil, false, nil }
