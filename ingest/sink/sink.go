// Package sink declares what an input hands its events to, as the inputs
// see it: the aggregator in a counting server, the fleet's forwarder in
// one that only filters. The inputs that resume from a position of their
// own (a followed file, EKS's log streams, GKE's subscription, Kafka's
// partitions) share these, so that each does not declare them again.
package sink

import (
	"context"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// Ingester commits events together with the input positions they were
// read up to: the one thing an input needs of what it hands events to.
// What it could not decode it tells its Tallies.
type Ingester interface {
	IngestAt(ctx context.Context, origin classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error)
}

// CursorReader reads a committed position back, so that an input resumes
// where its last commit left off.
type CursorReader interface {
	Cursor(name string) ([]byte, bool, error)
}

// PrefilterCounter tallies the events an input's prefilter set aside
// undecoded (the aggregator does), by the result they would have had,
// and notes the clusters heard through them.
type PrefilterCounter interface {
	CountPrefiltered(source string, p classify.Prefiltered)
	// HeardReads notes that cluster sent events the prefilter set aside,
	// reads among them when read is true, so that a cluster whose reads
	// are not logged is told from one that reads.
	HeardReads(cluster string, read bool)
}

// Tallies counts, in the counting metrics, what an input could not
// decode or set aside undecoded: the aggregator does. An input takes it
// beside what it commits to, so that committing is one method.
type Tallies interface {
	CountInvalid(source string, n int)
	CountDecodeError(source, reason string, n int)
	PrefilterCounter
}

// OrNone is t, or Tallies that count nothing when t is nil: an input
// whose caller counts nothing (a test, a benchmark) needs none.
func OrNone(t Tallies) Tallies {
	if t == nil {
		return none{}
	}
	return t
}

type none struct{}

func (none) CountInvalid(string, int)                      {}
func (none) CountDecodeError(string, string, int)          {}
func (none) CountPrefiltered(string, classify.Prefiltered) {}
func (none) HeardReads(string, bool)                       {}
