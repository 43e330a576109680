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
	agg Aggregator
	pub *publisher
}

var (
	_ kafka.BatchIngester = (*filter)(nil)
	_ sink.Ingester       = (*filter)(nil)
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

// noCursors makes the filter's consumer start every partition from its
// group's committed offset: nothing of the audit topics is stored here.
type noCursors struct{}

func (noCursors) Cursor(string) ([]byte, bool, error) { return nil, false, nil }
