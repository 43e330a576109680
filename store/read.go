package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// Cursor reads a committed cursor.
func (s *Store) Cursor(name string) (value []byte, ok bool, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(encodeCursorKey(name))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		value, err = item.ValueCopy(nil)
		ok = err == nil
		return err
	})
	return value, ok, err
}

// Seen reports, for each ID, whether a request with that ID was already
// counted in the cluster. It only reads: dry runs use it.
func (s *Store) Seen(cluster string, ids []string) ([]bool, error) {
	out, err := s.seen(ids, func(id string) []byte { return encodeMarkKey(prefixMark, cluster, id) })
	if err != nil {
		return nil, err
	}
	// Read afresh rather than from the sets the commits keep: a set
	// read here and kept could miss a commit that lands meanwhile.
	sets := map[markScope]*markSet{}
	now := uint64(s.now().Unix())
	for i, id := range ids {
		id = countkey.MarkID(id)
		sc, ok := scopeOf(cluster, id)
		if out[i] || !ok {
			continue
		}
		set, ok := sets[sc]
		if !ok {
			if set, err = s.readMarkSet(sc, now); err != nil {
				return nil, err
			}
			sets[sc] = set
		}
		_, out[i] = set.hashes[markHash(id)]
	}
	return out, nil
}

// seen reports, for each ID, whether its dedupe mark is in the store.
func (s *Store) seen(ids []string, markKey func(id string) []byte) ([]bool, error) {
	out := make([]bool, len(ids))
	err := s.db.View(func(txn *badger.Txn) error {
		for i, id := range ids {
			_, err := txn.Get(markKey(id))
			switch {
			case err == nil:
				out[i] = true
			case !errors.Is(err, badger.ErrKeyNotFound):
				return fmt.Errorf("store: reading dedupe mark: %w", err)
			}
		}
		return nil
	})
	return out, err
}

// APIs lists the APIs that have unexpired counts, sorted by cluster and name.
func (s *Store) APIs() []APIInfo { return s.infos(prefixMeta) }

// infos lists the unexpired metadata of one subject, sorted by name and
// cluster.
func (s *Store) infos(metaPrefix byte) []APIInfo {
	s.metaMu.RLock()
	out := make([]APIInfo, 0, len(s.meta))
	for mk, info := range s.meta {
		if mk[0] != metaPrefix || s.Expired(info.LastHour) {
			continue
		}
		info.Versions = s.versions.by[mk]
		info.Nodes = maps.Clone(info.Nodes)
		maps.DeleteFunc(info.Nodes, func(_ string, last time.Time) bool { return s.Expired(last) })
		out = append(out, info)
	}
	s.metaMu.RUnlock()
	slices.SortFunc(out, func(a, b APIInfo) int {
		if c := strings.Compare(a.API, b.API); c != 0 {
			return c
		}
		return strings.Compare(a.Cluster, b.Cluster)
	})
	return out
}

// ScanCounts calls fn for every count of one API in one cluster whose hour is
// in [from, to], in key order (hour first). The strings of the keys fn gets
// are shared between keys: equal values are one string.
func (s *Store) ScanCounts(cluster, api string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error {
	return s.scanCounts(apiSubject.countPrefix(cluster, api), cluster, api, from, to, fn)
}

// scanCounts is ScanCounts over the counts under prefix, those of one
// subject, named name, in one cluster.
func (s *Store) scanCounts(prefix []byte, cluster, name string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error {
	in := newInterner()
	var buf [8]byte
	return s.scanHours(prefix, from, to, func(item *badger.Item) error {
		k := countkey.CountKey{Cluster: cluster, API: name}
		if err := in.decodeCountKeyAfter(item.Key()[len(prefix):], &k); err != nil {
			return err
		}
		v, err := item.ValueCopy(buf[:0])
		if err != nil {
			return err
		}
		if len(v) != 8 {
			return errCorruptKey
		}
		return fn(k, binary.BigEndian.Uint64(v))
	})
}

// scanHours calls fn, in key order, for every record under prefix whose key
// continues with an hour in [from, to].
func (s *Store) scanHours(prefix []byte, from, to time.Time, fn func(*badger.Item) error) error {
	if from.Before(time.Unix(0, 0)) {
		// Hours are stored as unsigned seconds; nothing is before 1970.
		from = time.Unix(0, 0)
	}
	start := appendHour(slices.Clone(prefix), from.Truncate(time.Hour))
	end := appendHour(slices.Clone(prefix), to.Truncate(time.Hour).Add(time.Hour))
	return s.db.View(func(txn *badger.Txn) error {
		// No value prefetch: it starts a goroutine per item, and every
		// value here is a few bytes that live in the LSM tree beside its key.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(start); it.Valid(); it.Next() {
			item := it.Item()
			if string(item.Key()) >= string(end) {
				return nil
			}
			if err := fn(item); err != nil {
				return err
			}
		}
		return nil
	})
}
