package eks

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// checkpoint is where reading stopped, committed with the counts of the
// events read up to it. CloudWatch has no offset to resume from, only
// times, and may deliver an event after later ones; so a poll reads again
// from the overlap before the newest event read (the watermark), and the
// checkpoint remembers the events it has read since then, to skip them.
type checkpoint struct {
	// watermark is the newest event time read, in Unix milliseconds as
	// CloudWatch gives them; never ahead of the clock, so that one event
	// from a clock gone wrong cannot make polls pass over the others.
	watermark int64
	// seen holds the events read at or after watermark-overlap: the key
	// of each (eventKey) with its time.
	seen map[uint64]int64
}

// maxSeen bounds the events the checkpoint remembers, and so its size: 8
// bytes of key and two or three of time each, some 350 KiB at most,
// written with every page. A burst past it (over 100 events a second for
// the default 5m overlap) forgets the oldest. They are read again, but
// count once all the same: the aggregator marks every request it counts
// by its auditID in the store, in the same transaction as the count, and
// skips a marked one. What the checkpoint adds is that events read before
// are not decoded again nor reported as new.
const maxSeen = 1 << 15

// checkpointVersion is the first byte of an encoded checkpoint, so that a
// later format can tell an earlier one.
const checkpointVersion = 1

// eventKey identifies a log event within its group: the first 8 bytes of
// SHA-256 over the stream and the event ID. The stream is part of it since
// moto numbers events per server and other servers may per stream; AWS's
// IDs are unique in the group. A new event is taken for one read before
// with odds of at most 2^-49 (maxSeen keys of 64 bits), and skipped.
func eventKey(stream, id string) uint64 {
	b := make([]byte, 0, len(stream)+1+len(id))
	b = append(append(append(b, stream...), 0), id...)
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:8])
}

func freshCheckpoint(watermark int64) *checkpoint {
	return &checkpoint{watermark: watermark, seen: map[uint64]int64{}}
}

// from is the start time of the next poll.
func (c *checkpoint) from(overlap int64) int64 { return max(c.watermark-overlap, 0) }

// prune forgets the events the next poll cannot return, those before
// from(overlap), and then the oldest past maxSeen.
func (c *checkpoint) prune(overlap int64, limit int) {
	from := c.from(overlap)
	for k, ts := range c.seen {
		if ts < from {
			delete(c.seen, k)
		}
	}
	if over := len(c.seen) - limit; over > 0 {
		for _, e := range c.sorted()[len(c.seen)-over:] {
			delete(c.seen, e.key)
		}
	}
}

type seenEvent struct {
	key uint64
	ts  int64
}

// sorted lists the events newest first (by key within a time), so that an
// encoding is the same for the same events.
func (c *checkpoint) sorted() []seenEvent {
	out := make([]seenEvent, 0, len(c.seen))
	for k, ts := range c.seen {
		out = append(out, seenEvent{k, ts})
	}
	slices.SortFunc(out, func(a, b seenEvent) int {
		return cmp.Or(cmp.Compare(b.ts, a.ts), cmp.Compare(a.key, b.key))
	})
	return out
}

// encode writes the version byte, the watermark (varint), the number of
// events (uvarint), then for each event, newest first, its time as the
// varint of watermark minus it and its 8-byte key, big-endian.
func (c *checkpoint) encode() []byte {
	events := c.sorted()
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(events)*(4+8))
	b = append(b, checkpointVersion)
	b = binary.AppendVarint(b, c.watermark)
	b = binary.AppendUvarint(b, uint64(len(events)))
	for _, e := range events {
		b = binary.AppendVarint(b, c.watermark-e.ts)
		b = binary.BigEndian.AppendUint64(b, e.key)
	}
	return b
}

var errCorrupt = errors.New("corrupt checkpoint")

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) == 0 || b[0] != checkpointVersion {
		return nil, fmt.Errorf("%w: unknown version", errCorrupt)
	}
	b = b[1:]
	watermark, n := binary.Varint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad watermark", errCorrupt)
	}
	b = b[n:]
	count, n := binary.Uvarint(b)
	// Each event takes at least 9 bytes: count cannot claim more.
	if n <= 0 || count > uint64(len(b)-n)/9 {
		return nil, fmt.Errorf("%w: bad event count", errCorrupt)
	}
	b = b[n:]
	c := &checkpoint{watermark: watermark, seen: make(map[uint64]int64, count)}
	for range count {
		age, n := binary.Varint(b)
		if n <= 0 || len(b) < n+8 {
			return nil, fmt.Errorf("%w: truncated event", errCorrupt)
		}
		c.seen[binary.BigEndian.Uint64(b[n:])] = watermark - age
		b = b[n+8:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the events", errCorrupt, len(b))
	}
	return c, nil
}
