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
// read up to, and tallies what an input could not decode.
type Ingester interface {
	IngestAt(ctx context.Context, origin classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error)
	CountInvalid(source string, n int)
	CountDecodeError(source, reason string, n int)
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
