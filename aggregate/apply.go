package aggregate

import (
	"context"

	"github.com/kube-sunset/sunset/countkey"
)

// Classify decides which of events count, exactly as Ingest does, and
// returns the requests Ingest would commit (those of APIs, then those of
// field rules) without committing them; Summary tells what was skipped.
// Together with Apply it lets a caller do something with the requests
// between the two steps, such as sending them to other Sunset replicas.
func (a *Aggregator) Classify(origin Origin, events []Event) ([]countkey.Request, Summary) {
	return a.classifyAll(origin, events, false)
}

// Apply commits requests that are already classified, by Classify here or
// by another replica, with cursors in the same transaction, and returns
// once they are durable. Requests whose hour has expired meanwhile are
// skipped. Like Ingest, a non-nil error means nothing may be assumed
// committed, and applying the same requests again is safe.
func (a *Aggregator) Apply(ctx context.Context, source string, reqs []countkey.Request, cursors ...countkey.Cursor) (Summary, error) {
	var sum Summary
	now := a.now()
	// Sized once: a Request is large, and a Kafka batch holds hundreds.
	live := make([]countkey.Request, 0, len(reqs))
	for _, r := range reqs {
		if a.expired(r.Key.Hour, now) {
			a.metrics.events.WithLabelValues(source, string(ResultExpired)).Inc()
			sum.skip(ResultExpired)
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
	sum.tally(j.reqs, r.out)
	return sum, nil
}

// Add adds o's tallies to s.
func (s *Summary) Add(o Summary) {
	s.Counted += o.Counted
	s.Duplicates += o.Duplicates
	s.FieldMatches += o.FieldMatches
	s.Skipped += o.Skipped
	for r, n := range o.SkippedBy {
		if s.SkippedBy == nil {
			s.SkippedBy = map[string]int{}
		}
		s.SkippedBy[r] += n
	}
}
