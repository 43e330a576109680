package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// marked reports whether the dedupe mark mk is stored or, with seen, is
// already in the transaction; a nil mk is not. With seen, a mark not found
// is added to it: the caller writes it.
func marked(txn *badger.Txn, mk []byte, seen map[string]struct{}) (bool, error) {
	if mk == nil {
		return false, nil
	}
	if _, ok := seen[string(mk)]; ok {
		return true, nil
	}
	_, err := txn.Get(mk)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, badger.ErrKeyNotFound):
		return false, fmt.Errorf("store: reading dedupe mark: %w", err)
	}
	if seen != nil {
		seen[string(mk)] = struct{}{}
	}
	return false, nil
}

// applyChunk counts entries and writes cursors in one transaction, and
// marks the outcomes of the entries counted before as duplicates.
func (s *Store) applyChunk(entries []entry, cursors []countkey.Cursor) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()

	w := &chunkWrite{txn: txn, deltas: map[string]uint64{}, expiry: map[string]uint64{}, meta: map[string]APIInfo{}, touched: map[string]time.Time{}, legacySeen: map[string]struct{}{}}
	w.cc = newClientCap(s)
	defer w.cc.close()
	s.topology.prune(s)
	w.tc = newTopologyCap(s.topology)
	if err := s.markNew(w, entries); err != nil {
		return err
	}
	if err := w.writeCounts(); err != nil {
		return err
	}
	if err := s.writeMeta(txn, w.meta); err != nil {
		return err
	}
	if w.capped != nil {
		entries = w.capped
	}
	if err := s.applySightings(txn, entries); err != nil {
		return err
	}
	if err := writeCursors(txn, cursors); err != nil {
		return err
	}
	if err := w.segments.write(txn, s.marks); err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("store: committing: %w", err)
	}
	s.publishChunk(w)
	return nil
}

// chunkWrite is what the steps of applyChunk share.
type chunkWrite struct {
	txn *badger.Txn
	cc  *clientCap
	tc  *topologyCap
	// deltas are what the chunk adds to each count, by count key; order
	// holds the count keys as first met, so that the counts are written
	// in the same order every time.
	deltas map[string]uint64
	order  []string
	expiry map[string]uint64
	// meta are the metadata records the chunk changes, by metadata key.
	meta map[string]APIInfo
	// touched holds, by metadata key, the earliest hour the chunk counts
	// a request of, for the versions.
	touched map[string]time.Time
	capped  []entry // entries with capped keys, copied once one changes
	// segments are the marks of requests whose IDs carry a time
	// (marks.go), legacySeen the keys of the marks of the others.
	segments   segmentWrite
	legacySeen map[string]struct{}
}

// markNew marks the outcomes of the entries counted before as duplicates
// and, for each other one, caps its key, writes its dedupe mark and
// tallies what it adds to its count and metadata.
func (s *Store) markNew(w *chunkWrite, entries []entry) error {
	for i, e := range entries {
		d, mark, err := s.counted(w, e)
		if err != nil {
			return err
		}
		if e.out.Duplicate = d; d {
			continue
		}
		if e, err = w.capKey(entries, i, e); err != nil {
			return err
		}
		exp := s.expiresAt(e.Key.Hour)
		if err := mark(exp); err != nil {
			return err
		}
		ck := string(e.sub.countKey(e.Key))
		if _, ok := w.deltas[ck]; !ok {
			w.order = append(w.order, ck)
		}
		w.deltas[ck]++
		w.expiry[ck] = exp
		s.noteMeta(w, e)
	}
	return nil
}

// counted reports whether e was counted before: earlier in the
// transaction, or by the store under its mark (in a segment, or a record
// of its own) or under the legacy mark an older version may have
// written. For a request not counted before, mark writes its mark, which
// expires at the time given.
func (s *Store) counted(w *chunkWrite, e entry) (bool, func(expires uint64) error, error) {
	id := countkey.MarkID(e.ID)
	sc, ok := scopeOf(e.Key.Cluster, id)
	if !ok {
		mk := rawMarkKey(prefixMark, e.Key.Cluster, id)
		d, err := marked(w.txn, mk, w.legacySeen)
		if err == nil && !d {
			d, err = marked(w.txn, s.legacyMark(prefixMark, e.Key.Cluster, e.LegacyID, e.Key.Hour), nil)
		}
		return d, func(exp uint64) error { return setEntry(w.txn, expiringEntry(mk, nil, exp)) }, err
	}
	ref := markRef{scope: sc, hash: markHash(id)}
	if w.segments.pending(ref) {
		return true, nil, nil
	}
	set, err := s.markSetOf(sc)
	if err != nil {
		return false, nil, err
	}
	d := s.marks.has(set, ref.hash)
	if !d && !s.marksMigrated {
		// Until Open has moved them into segments, marks of their own
		// may still be stored for such IDs.
		d, err = marked(w.txn, rawMarkKey(prefixMark, e.Key.Cluster, id), nil)
	}
	if err == nil && !d {
		d, err = marked(w.txn, s.legacyMark(prefixMark, e.Key.Cluster, e.LegacyID, e.Key.Hour), nil)
	}
	return d, func(exp uint64) error { w.segments.mark(ref, exp); return nil }, err
}

// capKey returns entries[i], which is e, with its key as the caps count it.
func (w *chunkWrite) capKey(entries []entry, i int, e entry) (entry, error) {
	k, err := w.cc.key(e.sub, w.tc.key(e.Key))
	if err != nil {
		return e, err
	}
	if k == e.Key {
		return e, nil
	}
	// The caller's requests stay as they were. A folded request
	// keeps no sighting: the workload of "other" means nothing.
	if w.capped == nil {
		w.capped = slices.Clone(entries)
	}
	w.capped[i].Key = k
	if k.Username != e.Key.Username || k.UserAgent != e.Key.UserAgent {
		w.capped[i].Seen = nil
	}
	return w.capped[i], nil
}

// writeCounts adds the tallied deltas to the stored counts.
func (w *chunkWrite) writeCounts() error {
	for _, ck := range w.order {
		key := []byte(ck)
		var current uint64
		item, err := w.txn.Get(key)
		switch {
		case err == nil:
			if current, err = countValue(item); err != nil {
				return damaged("count", err)
			}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return fmt.Errorf("store: reading count: %w", err)
		}
		val := binary.BigEndian.AppendUint64(nil, current+w.deltas[ck])
		if err := setEntry(w.txn, expiringEntry(key, val, w.expiry[ck])); err != nil {
			return err
		}
	}
	return nil
}

// writeMeta writes the metadata records in updates, by metadata key.
func (s *Store) writeMeta(txn *badger.Txn, updates map[string]APIInfo) error {
	for mk, info := range updates {
		val, err := json.Marshal(info)
		if err != nil {
			return err
		}
		if err := setEntry(txn, expiringEntry([]byte(mk), val, s.expiresAt(info.LastHour))); err != nil {
			return err
		}
	}
	return nil
}

// writeCursors writes cursors, which never expire.
func writeCursors(txn *badger.Txn, cursors []countkey.Cursor) error {
	for _, c := range cursors {
		if err := setEntry(txn, badger.NewEntry(encodeCursorKey(c.Name), c.Value)); err != nil {
			return err
		}
	}
	return nil
}

// publishChunk hands what a committed chunk added (clients, metadata,
// apiservers, folds) to the caches; only after the commit, so that they
// never hold what a failed one wrote.
func (s *Store) publishChunk(w *chunkWrite) {
	w.cc.publish()
	s.metaMu.Lock()
	for mk, info := range w.meta {
		s.meta[mk] = info
	}
	s.versions.written(w.touched, s.now())
	s.metaMu.Unlock()
	for _, info := range w.meta {
		for node, last := range info.Nodes {
			s.topology.note(info.Cluster, node, last)
		}
	}
	s.publishFolds(w.tc)
	w.segments.publish(s.marks)
}

// countValue reads the value of a count record.
func countValue(item *badger.Item) (uint64, error) {
	var n uint64
	err := item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("store: count value of %d bytes", len(v))
		}
		n = binary.BigEndian.Uint64(v)
		return nil
	})
	return n, err
}

// noteMeta records in w.meta how e changes its subject's metadata, if at
// all, and that the chunk counts a request of it.
func (s *Store) noteMeta(w *chunkWrite, e entry) {
	updates := w.meta
	r := e.Request
	mk := string(e.sub.metaKey(r.Key.Cluster, r.Key.API))
	touch(w.touched, mk, r.Key.Hour)
	info, ok := updates[mk]
	if !ok {
		s.metaMu.RLock()
		info, ok = s.meta[mk]
		s.metaMu.RUnlock()
		if !ok {
			info = APIInfo{Cluster: r.Key.Cluster, API: r.Key.API, FirstHour: r.Key.Hour, LastHour: r.Key.Hour}
		}
	}
	changed := !ok
	if rel := s.merge.RemovedRelease(info.RemovedRelease, info.LastHour, r.RemovedRelease, r.Key.Hour); rel != info.RemovedRelease {
		info.RemovedRelease, changed = rel, true
	}
	if r.Key.Hour.After(info.LastHour) {
		info.LastHour, changed = r.Key.Hour, true
	}
	if r.Key.Hour.Before(info.FirstHour) {
		info.FirstHour, changed = r.Key.Hour, true
	}
	if last, ok := info.Nodes[r.Key.Node]; !ok || r.Key.Hour.After(last) {
		// The map is shared with s.meta until the commit publishes the
		// update: write to a copy.
		nodes := maps.Clone(info.Nodes)
		if nodes == nil {
			nodes = map[string]time.Time{}
		}
		nodes[r.Key.Node] = r.Key.Hour
		info.Nodes, changed = nodes, true
	}
	if changed {
		updates[mk] = info
	}
}

func expiringEntry(key, val []byte, expiresAt uint64) *badger.Entry {
	e := badger.NewEntry(key, val)
	e.ExpiresAt = expiresAt
	return e
}
