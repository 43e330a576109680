// Package kafka consumes audit events from Kafka topics with exactly-once
// counts.
//
// Shippers (fluent-bit, Vector, fluentd, Azure Event Hubs) put audit events
// in several shapes; decode recognises them. Each partition's position is
// committed to badger in the same transaction as the counts it produced, and
// consumption resumes from there, so a crash at any instant neither loses a
// message nor counts one twice. Offsets are also committed to the consumer
// group, for lag tools and for replicas that take a partition over.
package kafka

import (
	"context"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// Source is the value of the source label for events from Kafka.
const Source = "kafka"

// OriginEvents is the events of one batch that share an origin.
type OriginEvents struct {
	Origin classify.Origin
	Events []classify.Event
}

// BatchIngester takes a whole batch in one call, so that one batch can be
// one round trip however many origins it holds (the fleet's filter). The
// batch's offsets are committed to the group only after it returns nil.
type BatchIngester interface {
	IngestBatch(ctx context.Context, origins []*OriginEvents, cursor countkey.Cursor) error
}

// PoisonSample describes a skipped message without its content.
type PoisonSample struct {
	Reason    string `json:"reason"`
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	// Messages is how many messages from Offset on it stands for: 1, or
	// the rest of a record batch too large to decompress (too_large).
	Messages int64     `json:"messages"`
	Time     time.Time `json:"time"`
}
