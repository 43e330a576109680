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
// interval it runs badger's value-log garbage collection, and once the
// clock has entered a new hour, Sweep. It pauses while the filesystem is
// below the reserve: both write.
func (s *Store) Maintain(ctx context.Context, every time.Duration) {
	log := s.log.With().Str("component", "store").Logger()
	t := time.NewTicker(every)
	defer t.Stop()
	var swept time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.CheckSpace(); err != nil {
			log.Warn().Err(err).Msg("maintenance paused")
			continue
		}
		if hour := s.now().Truncate(time.Hour); hour.After(swept) {
			n, err := s.Sweep()
			if err != nil {
				log.Error().Err(err).Msg("deleting expired records failed; retrying at the next interval")
			} else {
				swept = hour
				log.Debug().Int("deleted", n).Msg("deleted expired records")
			}
		}
		if err := s.CollectGarbage(); err != nil {
			log.Error().Err(err).Msg("value log garbage collection failed; retrying at the next interval")
		}
	}
}

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
