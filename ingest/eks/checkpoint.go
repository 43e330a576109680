package eks

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// checkpoint is where reading stopped, committed with the counts of the
// events read up to it. CloudWatch has no offset to resume from, only
// times, and may deliver an event after later ones of its stream. Each
// stream, one per apiserver, keeps its own position, so that a stream
// delivered late (an apiserver whose logs reach CloudWatch twenty minutes
// after the others') is read from where it is, not from where the others
// are.
type checkpoint struct {
	// start is where a stream not read before starts: its watermark. A
	// fresh checkpoint's is startFrom before the clock; one migrated
	// from the single watermark of version 1 is that watermark.
	start int64
	// streams are the audit streams read so far, by name.
	streams map[string]*streamState
	// legacy holds the events a version-1 checkpoint had read, keyed as
	// seen is, until every stream has read past them.
	legacy map[uint64]int64
}

// streamState is where one stream's reading stands. Times are Unix
// milliseconds, CloudWatch's event times unless said otherwise.
type streamState struct {
	// watermark is the newest event time read; never ahead of the
	// clock, so that one event from a clock gone wrong cannot make reads
	// pass over the others.
	watermark int64
	// sweptFrom is the watermark as the last complete sweep began. The
	// next sweep reads from sweptFrom-overlap (what can still arrive in
	// time) and looks one overlap further back for what arrives late.
	sweptFrom int64
	// sweptAt is when, by Sunset's clock, the last complete sweep began;
	// 0 means none has.
	sweptAt int64
	// floor is the earliest time the stream is read from: where its
	// first read began. Nothing before it is read, nor called late.
	floor int64
	// ingested is the newest ingestion time read, by CloudWatch's
	// clock: a stream whose lastIngestionTime is no newer has nothing
	// unread.
	ingested int64
	// forgot is the newest time of an event forgotten to keep the
	// checkpoint within maxSeen: below it, an event not in seen may have
	// been read before, so it is not called late.
	forgot int64
	// seen holds the events read that the next sweep can return: the
	// key of each (eventKey) with its time.
	seen map[uint64]int64
}

// maxSeen bounds the events the checkpoint remembers, all streams
// together, and so its size: 8 bytes of key and two or three of time
// each, some 350 KiB at most, written with every page. A burst past it
// (over 50 events a second for the default 5m overlap, since a sweep
// reads two overlaps back) forgets the oldest. They are read again, but
// count once all the same: the aggregator marks every request it counts
// by its auditID in the store, in the same transaction as the count, and
// skips a marked one. What the checkpoint adds is that events read before
// are not decoded again nor reported as new.
const maxSeen = 1 << 15

// Versions of an encoded checkpoint, its first byte. Version 1 had one
// watermark for every stream of the group; decodeCheckpoint migrates it.
const (
	checkpointV1      = 1
	checkpointVersion = 2
)

// maxStreamName is CloudWatch's limit on a log stream name.
const maxStreamName = 512

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

func freshCheckpoint(start int64) *checkpoint {
	return &checkpoint{start: start, streams: map[string]*streamState{}}
}

// stream returns a stream's state, starting it at c.start when it is
// new: its first read begins an overlap before that, as every poll of
// version 1 did, and is a sweep.
func (c *checkpoint) stream(name string, overlap int64) *streamState {
	if st, ok := c.streams[name]; ok {
		return st
	}
	st := &streamState{watermark: c.start, sweptFrom: c.start, floor: max(c.start-overlap, 0), seen: map[uint64]int64{}}
	c.streams[name] = st
	return st
}

// known reports whether the event was read before.
func (c *checkpoint) known(st *streamState, key uint64) bool {
	if _, ok := st.seen[key]; ok {
		return true
	}
	_, ok := c.legacy[key]
	return ok
}

// sweepFrom is where a sweep starts: one overlap before the counting
// window (sweptFrom-overlap), to find what arrives late, never before the
// floor.
func (st *streamState) sweepFrom(overlap int64) int64 {
	return max(st.sweptFrom-2*overlap, st.floor, 0)
}

// lateBefore is the time before which an event read for the first time
// arrived late: over an overlap behind its stream's newest when the last
// sweep began. Nothing is late before the stream has been swept.
func (st *streamState) lateBefore(overlap int64) int64 {
	if st.sweptAt == 0 {
		return st.floor
	}
	return max(st.sweptFrom-overlap, st.floor)
}

// prune forgets the events the next sweep cannot return, then the oldest
// past limit across all streams.
func (c *checkpoint) prune(overlap int64, limit int) {
	legacyFrom := int64(-1)
	for _, st := range c.streams {
		from := st.sweepFrom(overlap)
		maps.DeleteFunc(st.seen, func(_ uint64, ts int64) bool { return ts < from })
		if legacyFrom < 0 || from < legacyFrom {
			legacyFrom = from
		}
	}
	if legacyFrom >= 0 {
		maps.DeleteFunc(c.legacy, func(_ uint64, ts int64) bool { return ts < legacyFrom })
	}
	total := len(c.legacy)
	for _, st := range c.streams {
		total += len(st.seen)
	}
	if over := total - limit; over > 0 {
		all := make([]seenRef, 0, total)
		for _, e := range sortedSeen(c.legacy) {
			all = append(all, seenRef{seenEvent: e})
		}
		for _, st := range c.streams {
			for _, e := range sortedSeen(st.seen) {
				all = append(all, seenRef{seenEvent: e, st: st})
			}
		}
		slices.SortFunc(all, func(a, b seenRef) int { return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.key, b.key)) })
		for _, e := range all[:over] {
			if e.st == nil {
				delete(c.legacy, e.key)
				continue
			}
			delete(e.st.seen, e.key)
			e.st.forgot = max(e.st.forgot, e.ts)
		}
	}
	if len(c.legacy) == 0 {
		c.legacy = nil
	}
}

type seenEvent struct {
	key uint64
	ts  int64
}

type seenRef struct {
	seenEvent
	st *streamState
}

// sortedSeen lists events newest first (by key within a time), so that an
// encoding is the same for the same events.
func sortedSeen(seen map[uint64]int64) []seenEvent {
	out := make([]seenEvent, 0, len(seen))
	for k, ts := range seen {
		out = append(out, seenEvent{k, ts})
	}
	slices.SortFunc(out, func(a, b seenEvent) int {
		return cmp.Or(cmp.Compare(b.ts, a.ts), cmp.Compare(a.key, b.key))
	})
	return out
}

// newest is the newest watermark of all streams, or start without any.
func (c *checkpoint) newest() int64 {
	n := c.start
	for _, st := range c.streams {
		n = max(n, st.watermark)
	}
	return n
}

// encode writes, after the version byte: start (varint); the legacy
// events (appendEvents, relative to start); the number of streams
// (uvarint), then each in name order: its name (uvarint length, bytes),
// watermark (varint), watermark-sweptFrom, sweptAt, watermark-floor,
// ingested, watermark-forgot (varints) and its events (appendEvents,
// relative to the watermark).
func (c *checkpoint) encode() []byte {
	b := []byte{checkpointVersion}
	b = binary.AppendVarint(b, c.start)
	b = appendEvents(b, c.start, c.legacy)
	names := slices.Sorted(maps.Keys(c.streams))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		st := c.streams[name]
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendVarint(b, st.watermark)
		for _, v := range []int64{st.watermark - st.sweptFrom, st.sweptAt, st.watermark - st.floor, st.ingested, st.watermark - st.forgot} {
			b = binary.AppendVarint(b, v)
		}
		b = appendEvents(b, st.watermark, st.seen)
	}
	return b
}

// appendEvents writes the number of events (uvarint), then for each,
// newest first, its time as the varint of base minus it and its 8-byte
// key, big-endian.
func appendEvents(b []byte, base int64, seen map[uint64]int64) []byte {
	events := sortedSeen(seen)
	b = binary.AppendUvarint(b, uint64(len(events)))
	for _, e := range events {
		b = binary.AppendVarint(b, base-e.ts)
		b = binary.BigEndian.AppendUint64(b, e.key)
	}
	return b
}

var errCorrupt = errors.New("corrupt checkpoint")

// reader reads an encoded checkpoint, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad %s", errCorrupt, what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of items each at least size bytes long, which the
// bytes left must be able to hold.
func (r *reader) count(what string, size int) int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)-n)/uint64(size) {
		r.err = fmt.Errorf("%w: bad %s", errCorrupt, what)
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

// events reads what appendEvents wrote.
func (r *reader) events(base int64) map[uint64]int64 {
	// Each event takes at least 9 bytes.
	n := r.count("event count", 9)
	seen := make(map[uint64]int64, n)
	for range n {
		age := r.varint("event time")
		if r.err == nil && len(r.b) < 8 {
			r.err = fmt.Errorf("%w: truncated event", errCorrupt)
		}
		if r.err != nil {
			return nil
		}
		seen[binary.BigEndian.Uint64(r.b)] = base - age
		r.b = r.b[8:]
	}
	return seen
}

// decodeCheckpoint reads an encoded checkpoint. A version-1 checkpoint,
// one watermark for the group, becomes every stream's starting point, and
// the events it had read are remembered until every stream reads past
// them: upgrading neither skips nor repeats an event that version 1 would
// have read.
func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) == 0 || (b[0] != checkpointVersion && b[0] != checkpointV1) {
		return nil, fmt.Errorf("%w: unknown version", errCorrupt)
	}
	r := &reader{b: b[1:]}
	c := freshCheckpoint(r.varint("start"))
	c.legacy = r.events(c.start)
	if b[0] == checkpointV1 {
		if r.err == nil && len(r.b) != 0 {
			r.err = fmt.Errorf("%w: %d bytes after the events", errCorrupt, len(r.b))
		}
		if r.err != nil {
			return nil, r.err
		}
		if len(c.legacy) == 0 {
			c.legacy = nil
		}
		return c, nil
	}
	if len(c.legacy) == 0 {
		c.legacy = nil
	}
	// A stream takes at least 9 bytes: a name's length and 8 varints.
	n := r.count("stream count", 9)
	for range n {
		size := r.count("stream name", 1)
		if r.err != nil {
			break
		}
		if size > maxStreamName || size > len(r.b) {
			r.err = fmt.Errorf("%w: bad stream name", errCorrupt)
			break
		}
		name := string(r.b[:size])
		r.b = r.b[size:]
		st := &streamState{watermark: r.varint("watermark")}
		st.sweptFrom = st.watermark - r.varint("sweep start")
		st.sweptAt = r.varint("sweep time")
		st.floor = st.watermark - r.varint("floor")
		st.ingested = r.varint("ingestion time")
		st.forgot = st.watermark - r.varint("forgotten time")
		st.seen = r.events(st.watermark)
		if _, dup := c.streams[name]; dup && r.err == nil {
			r.err = fmt.Errorf("%w: stream %q twice", errCorrupt, name)
		}
		c.streams[name] = st
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes after the streams", errCorrupt, len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return c, nil
}
