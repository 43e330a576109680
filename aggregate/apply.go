package aggregate

import (
	"context"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// Classify decides which of events count, exactly as Ingest does, and
// returns the requests Ingest would commit (those of APIs, then those of
// field rules) without committing them; Summary tells what was skipped.
// Together with Apply it lets a caller do something with the requests
// between the two steps, such as sending them to other Sunset replicas.
func (a *Aggregator) Classify(origin classify.Origin, events []classify.Event) ([]countkey.Request, classify.Summary) {
	return a.classifyAll(origin, events, false)
}

// Apply commits requests that are already classified, by Classify here or
// by another replica, with cursors in the same transaction, and returns
// once they are durable. Requests whose hour has expired meanwhile are
// skipped. Like Ingest, a non-nil error means nothing may be assumed
// committed, and applying the same requests again is safe.
func (a *Aggregator) Apply(ctx context.Context, source string, reqs []countkey.Request, cursors ...countkey.Cursor) (classify.Summary, error) {
	var sum classify.Summary
	now := a.now()
	// Sized once: a Request is large, and a Kafka batch holds hundreds.
	live := make([]countkey.Request, 0, len(reqs))
	for _, r := range reqs {
		if a.cls.Expired(r.Key.Hour, now) {
			a.metrics.events.WithLabelValues(source, string(classify.ResultExpired)).Inc()
			sum.Tally(classify.ResultExpired)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 && len(cursors) == 0 {
		return sum, nil
	}
	j := &job{source: source, reqs: live, cursors: cursors, done: make(chan jobResult, 1)}
	r, err := a.submit(ctx, j)
	if err != nil {
		return sum, err
	}
	// The commit loop has counted the metrics (countCommitted).
	sum.Committed(j.reqs, r.out)
	return sum, nil
}
