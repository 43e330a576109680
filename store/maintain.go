package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// sweepChunk bounds how many keys one sweep transaction looks at, so that
// commits wait for a sweep only briefly.
const sweepChunk = 10000

// Maintain keeps the disk use of the store bounded until ctx is done: every
// interval it runs badger's value-log garbage collection, once the clock
// has entered a new hour Sweep, and once it has entered a new day after a
// sweep that deleted something, Compact. It pauses while the filesystem
// is below the reserve: all three write.
func (s *Store) Maintain(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var m maintenance
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.maintain(&m)
	}
}

// maintenance is what Maintain remembers between its rounds.
type maintenance struct {
	swept     time.Time // the hour of the last sweep
	compacted time.Time // the day of the last compaction
	deleted   int       // records swept since the last compaction
}

// maintain runs one round of Maintain.
func (s *Store) maintain(m *maintenance) {
	log := s.log.With().Str("component", "store").Logger()
	if err := s.CheckSpace(); err != nil {
		log.Warn().Err(err).Msg("maintenance paused")
		return
	}
	now := s.now()
	if hour := now.Truncate(time.Hour); hour.After(m.swept) {
		n, err := s.Sweep()
		m.deleted += n
		if err != nil {
			log.Error().Err(err).Msg("deleting expired records failed; retrying at the next interval")
		} else {
			m.swept = hour
			log.Debug().Int("deleted", n).Msg("deleted expired records")
		}
	}
	if day := now.Truncate(24 * time.Hour); day.After(m.compacted) && m.deleted > 0 {
		began := time.Now()
		if err := s.Compact(); err != nil {
			log.Error().Err(err).Msg("compacting the store failed; retrying at the next interval")
		} else {
			m.compacted, m.deleted = day, 0
			log.Debug().Dur("took", time.Since(began)).Msg("compacted the store")
		}
	}
	if err := s.CollectGarbage(); err != nil {
		log.Error().Err(err).Msg("value log garbage collection failed; retrying at the next interval")
	}
}

// Compact has badger compact every level above its last into the last,
// where a compaction drops the records that a sweep deleted or that
// expired, with their tombstones. Badger rewrites a table of its last
// level only when a compaction from above covers it, or once the table
// holds 10 MiB of stale data and is an hour old; at a low write rate
// that is weeks apart, and 60 simulated days at 252 requests an hour held
// 2.2 times the retention period's disk before levelling off. Compacting
// once a day after the sweeps drops, each day, the deleted records that
// badger has flushed from its memtables: 60 simulated days then stayed
// within 1 % of the retention period's disk (benchmarks/README.md,
// Scale). Commits go on meanwhile; badger's own compactions wait.
func (s *Store) Compact() error {
	if s.readOnly {
		return errors.New("store: opened read-only")
	}
	if err := s.guardSpace(); err != nil {
		return err
	}
	if err := s.db.Flatten(1); err != nil {
		return s.spaceError(fmt.Errorf("store: compacting: %w", err))
	}
	s.compacted.Add(1)
	return nil
}

// Compactions counts the Compact calls that succeeded since the store was
// opened.
func (s *Store) Compactions() uint64 { return s.compacted.Load() }

// Swept counts the records Sweep deleted since the store was opened.
func (s *Store) Swept() uint64 { return s.swept.Load() }

// Sweep deletes every record past the retention period by the store's
// clock: counts, dedupe marks, API metadata and workload records of hours
// that expired. Reads already skip them (badger's TTL), but only a
// compaction that rewrites their table frees their space, and the tables
// of old hours are rarely rewritten once nothing new lands near them. A
// deletion lands there, so the next compactions drop both. Cursors never
// expire. It returns how many records it deleted.
func (s *Store) Sweep() (int, error) {
	if s.readOnly {
		return 0, errors.New("store: opened read-only")
	}
	var from []byte
	deleted := 0
	for {
		n, next, err := s.sweepChunk(from)
		deleted += n
		s.swept.Add(uint64(n))
		if err != nil || next == nil {
			return deleted, err
		}
		from = next
	}
}

// sweepChunk deletes the expired records among up to sweepChunk keys from
// from on, in one transaction, and returns where to go on (nil at the end).
// It holds applyMu, so no commit can rewrite a key between the look and the
// deletion.
func (s *Store) sweepChunk(from []byte) (int, []byte, error) {
	if err := s.guardSpace(); err != nil {
		return 0, nil, err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	now := uint64(s.now().Unix())
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	// All versions, because badger hides what its own clock says has
	// expired, and those are the records to delete.
	it := txn.NewIterator(badger.IteratorOptions{AllVersions: true})
	var expired [][]byte
	var last, next []byte
	looked := 0
	for it.Seek(from); it.Valid(); it.Next() {
		item := it.Item()
		if bytes.Equal(item.Key(), last) {
			continue // an older version
		}
		if looked == sweepChunk {
			next = item.KeyCopy(nil)
			break
		}
		looked++
		last = item.KeyCopy(last[:0])
		exp := item.ExpiresAt()
		if exp == 0 || exp > now {
			continue // a tombstone, a cursor, or live
		}
		expired = append(expired, item.KeyCopy(nil))
	}
	it.Close()
	for _, k := range expired {
		err := txn.Delete(k)
		if errors.Is(err, badger.ErrTxnTooBig) {
			// Long keys (one API's many clients in one hour lie side
			// by side) fill a transaction before sweepChunk keys do:
			// commit what it holds and go on in a new one, else the
			// same chunk would fail at every sweep and nothing after
			// it would ever be deleted. applyMu is still held.
			if err := txn.Commit(); err != nil {
				return 0, nil, s.spaceError(fmt.Errorf("store: deleting expired records: %w", err))
			}
			txn = s.db.NewTransaction(true)
			defer txn.Discard()
			err = txn.Delete(k)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("store: deleting expired records: %w", err)
		}
	}
	if len(expired) > 0 {
		if err := txn.Commit(); err != nil {
			return 0, nil, s.spaceError(fmt.Errorf("store: deleting expired records: %w", err))
		}
		s.forgetExpiredMeta()
	}
	return len(expired), next, nil
}

// forgetExpiredMeta drops the metadata of APIs whose last hour expired.
func (s *Store) forgetExpiredMeta() {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	for k, info := range s.meta {
		if s.Expired(info.LastHour) {
			delete(s.meta, k)
		}
	}
}

// CollectGarbage runs badger's value-log garbage collection until it finds
// no file worth rewriting. Sunset's values are small enough to live in the
// LSM tree, so there is rarely anything to do.
func (s *Store) CollectGarbage() error {
	if s.readOnly {
		return nil
	}
	for {
		err := s.db.RunValueLogGC(0.5)
		switch {
		case err == nil:
			continue
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			return nil
		default:
			return s.spaceError(fmt.Errorf("store: value log garbage collection: %w", err))
		}
	}
}
