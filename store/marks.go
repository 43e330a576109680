package store

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Dedupe marks of most requests are not records of their own. A request
// whose ID starts with the time it was received (classify.RequestID:
// decimal Unix nanoseconds, then "/") is marked by an 8-byte hash of its
// ID in a segment: one record per cluster, hour of that time and commit,
// holding the hashes of the requests the commit counted first, written in
// the commit's transaction beside their counts. The hour comes from the ID
// alone, so every delivery of a request is looked up where the first was
// marked, whatever hour it is counted in. Which requests of an hour were
// counted is then read once, segment by segment, into a set in memory
// that the commits of that hour consult and extend; a badger lookup and a
// record per request were the most of a commit's cost.
//
// The hash is the first 8 bytes of the ID's SHA-256. Two requests of one
// cluster and hour collide, and the second is taken for a retry of the
// first, with a probability of at most n²/2⁶⁵ for n requests counted in
// that cluster and hour: below one in 10⁵ for 10⁷ requests in an hour.
// The time in the ID is the apiserver's, to the nanosecond, and an auditID
// a caller chooses is unknown to every other caller, so no caller can aim
// a collision at another's request.
//
// An ID without a time (a request without requestReceivedTimestamp), or
// one digested for its length (MarkID), keeps a mark of its own as
// before, and so do admission webhook counts (admission.go).

// prefixMarkSegment keys segments: cluster, hour, then the commit's nonce
// and sequence number, which only keep segments apart.
const prefixMarkSegment byte = 0x09

// DefaultMarkCacheBytes is how much memory the sets of marks may take
// when Options leaves MarkCacheBytes zero.
const DefaultMarkCacheBytes = 64 << 20

// markBytes is what one hash costs in a set in memory: a map slot and its
// share of the map's control bytes and growth room. setBytes is what a set
// costs beside its hashes.
const (
	markBytes = 24
	setBytes  = 256
)

// markScope is the requests one set of marks answers for: those of one
// cluster whose IDs carry a time within one hour.
type markScope struct {
	cluster string
	hour    int64 // Unix seconds
}

// scopeOf returns the scope of a request with the given ID (as MarkID
// returns it) in cluster, and false for an ID that carries no time.
func scopeOf(cluster, id string) (markScope, bool) {
	slash := strings.IndexByte(id, '/')
	if slash <= 0 || slash > 19 {
		return markScope{}, false
	}
	for i := range slash {
		if id[i] < '0' || id[i] > '9' {
			return markScope{}, false
		}
	}
	nanos, err := strconv.ParseInt(id[:slash], 10, 64)
	if err != nil {
		return markScope{}, false
	}
	secs := nanos / int64(time.Second)
	return markScope{cluster: cluster, hour: secs - secs%3600}, true
}

// markHash is the hash a segment holds for the ID id.
func markHash(id string) uint64 {
	sum := sha256.Sum256([]byte(id))
	return binary.BigEndian.Uint64(sum[:8])
}

// segmentPrefix is the prefix of every segment of sc.
func segmentPrefix(sc markScope) []byte {
	b := make([]byte, 0, 1+len(sc.cluster)+2+8+16)
	b = append(b, prefixMarkSegment)
	b = appendString(b, sc.cluster)
	return binary.BigEndian.AppendUint64(b, uint64(sc.hour))
}

// decodeSegmentKey returns the scope of a segment's key.
func decodeSegmentKey(k []byte) (markScope, error) {
	if len(k) == 0 || k[0] != prefixMarkSegment {
		return markScope{}, errCorruptKey
	}
	cluster, rest, err := readString(k[1:])
	if err != nil {
		return markScope{}, err
	}
	if len(rest) != 24 {
		return markScope{}, errCorruptKey
	}
	return markScope{cluster: cluster, hour: int64(binary.BigEndian.Uint64(rest))}, nil
}

// markSet is what a scope's segments hold.
type markSet struct {
	hashes map[uint64]struct{}
	// expires is the earliest expiry of the segments read into it or
	// added to it; 0 while it has none. Once passed, the set is read
	// again, without the segments that expired.
	expires uint64
	at      *list.Element
}

// markSets keeps the sets of the scopes commits touched last, within a
// budget of bytes. A set that is not kept is read again on its next use.
type markSets struct {
	mu     sync.Mutex
	budget int64
	bytes  int64
	sets   map[markScope]*markSet
	lru    *list.List // of markScope, the most recently used first
	// nonce and seq name this process's segments apart from any other's.
	nonce, seq uint64
}

func newMarkSets(budget int64) *markSets {
	return &markSets{budget: budget, sets: map[markScope]*markSet{}, lru: list.New(), nonce: rand.Uint64()}
}

// nextKey is the key of a new segment of sc.
func (m *markSets) nextKey(sc markScope) []byte {
	m.mu.Lock()
	m.seq++
	seq := m.seq
	m.mu.Unlock()
	b := segmentPrefix(sc)
	b = binary.BigEndian.AppendUint64(b, m.nonce)
	return binary.BigEndian.AppendUint64(b, seq)
}

// cached returns sc's set if it is kept and none of its segments expired
// by now (Unix seconds).
func (m *markSets) cached(sc markScope, now uint64) (*markSet, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set, ok := m.sets[sc]
	if !ok {
		return nil, false
	}
	if set.expires != 0 && set.expires <= now {
		m.drop(sc, set)
		return nil, false
	}
	m.lru.MoveToFront(set.at)
	return set, true
}

// has reports whether set holds h.
func (m *markSets) has(set *markSet, h uint64) bool {
	m.mu.Lock()
	_, ok := set.hashes[h]
	m.mu.Unlock()
	return ok
}

// keep adds a set read from the store.
func (m *markSets) keep(sc markScope, set *markSet) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.sets[sc]; ok {
		m.drop(sc, old)
	}
	set.at = m.lru.PushFront(sc)
	m.sets[sc] = set
	m.bytes += setBytes + int64(len(sc.cluster)) + markBytes*int64(len(set.hashes))
	m.evict()
}

// add adds what a committed segment holds to its scope's set, if kept:
// one that is not is read with the segment next time.
func (m *markSets) add(sc markScope, hashes []uint64, expires uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set, ok := m.sets[sc]
	if !ok {
		return
	}
	before := len(set.hashes)
	for _, h := range hashes {
		set.hashes[h] = struct{}{}
	}
	if set.expires == 0 || expires < set.expires {
		set.expires = expires
	}
	// A set read after the commit holds its hashes already.
	m.bytes += markBytes * int64(len(set.hashes)-before)
	m.evict()
}

// evict drops the sets used longest ago while the sets are over budget,
// keeping the last one used.
func (m *markSets) evict() {
	for m.bytes > m.budget && m.lru.Len() > 1 {
		back := m.lru.Back()
		sc := back.Value.(markScope)
		m.drop(sc, m.sets[sc])
	}
}

func (m *markSets) drop(sc markScope, set *markSet) {
	m.lru.Remove(set.at)
	delete(m.sets, sc)
	m.bytes -= setBytes + int64(len(sc.cluster)) + markBytes*int64(len(set.hashes))
}

// markSetOf returns sc's set, read from the store unless kept. Only
// commits call it, under applyMu, so that no commit lands between the
// read and the set being kept.
func (s *Store) markSetOf(sc markScope) (*markSet, error) {
	now := uint64(s.now().Unix())
	if set, ok := s.marks.cached(sc, now); ok {
		return set, nil
	}
	set, err := s.readMarkSet(sc, now)
	if err != nil {
		return nil, err
	}
	s.marks.keep(sc, set)
	return set, nil
}

// readMarkSet reads sc's segments that have not expired by now.
func (s *Store) readMarkSet(sc markScope, now uint64) (*markSet, error) {
	set := &markSet{hashes: map[uint64]struct{}{}}
	prefix := segmentPrefix(sc)
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			exp := item.ExpiresAt()
			if exp != 0 && exp <= now {
				continue
			}
			if err := item.Value(func(v []byte) error {
				if len(v)%8 != 0 {
					return fmt.Errorf("a segment of %d bytes, not a multiple of 8", len(v))
				}
				for i := 0; i < len(v); i += 8 {
					set.hashes[binary.BigEndian.Uint64(v[i:])] = struct{}{}
				}
				return nil
			}); err != nil {
				return damaged("dedupe mark segment", err)
			}
			if set.expires == 0 || (exp != 0 && exp < set.expires) {
				set.expires = exp
			}
		}
		return nil
	})
	var ue *unstorableError
	switch {
	case errors.As(err, &ue):
		// As a damaged count: the requests of the hour are skipped,
		// never counted again, and the others go on.
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("store: reading dedupe marks: %w", err)
	}
	return set, nil
}

// segmentWrite gathers the hashes one transaction marks, by scope, in
// the order the scopes were first met.
type segmentWrite struct {
	groups map[markScope]*segmentGroup
	order  []markScope
	// seen holds every hash of the transaction, so that a request twice
	// in it counts once.
	seen map[markRef]struct{}
}

type segmentGroup struct {
	hashes  []uint64
	expires uint64
}

type markRef struct {
	scope markScope
	hash  uint64
}

// pending reports whether ref is already marked by the transaction.
func (w *segmentWrite) pending(ref markRef) bool {
	_, ok := w.seen[ref]
	return ok
}

// mark adds ref to the transaction's segment of its scope, which expires
// no earlier than expires.
func (w *segmentWrite) mark(ref markRef, expires uint64) {
	if w.groups == nil {
		w.groups, w.seen = map[markScope]*segmentGroup{}, map[markRef]struct{}{}
	}
	w.seen[ref] = struct{}{}
	g, ok := w.groups[ref.scope]
	if !ok {
		g = &segmentGroup{}
		w.groups[ref.scope] = g
		w.order = append(w.order, ref.scope)
	}
	g.hashes = append(g.hashes, ref.hash)
	g.expires = max(g.expires, expires)
}

// write sets the transaction's segments.
func (w *segmentWrite) write(txn *badger.Txn, m *markSets) error {
	for _, sc := range w.order {
		g := w.groups[sc]
		val := make([]byte, 0, 8*len(g.hashes))
		for _, h := range g.hashes {
			val = binary.BigEndian.AppendUint64(val, h)
		}
		if err := setEntry(txn, expiringEntry(m.nextKey(sc), val, g.expires)); err != nil {
			return err
		}
	}
	return nil
}

// publish adds the committed segments to the sets kept.
func (w *segmentWrite) publish(m *markSets) {
	for _, sc := range w.order {
		g := w.groups[sc]
		m.add(sc, g.hashes, g.expires)
	}
}
