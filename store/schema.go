package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// prefixSchema keys the one record that says which version of the store's
// layout wrote the directory.
const prefixSchema byte = 0x30

// SchemaVersion is the layout this build writes. Version 1 (no schema
// record) identified a request by its auditID alone; version 2 by its
// cluster, auditID and requestReceivedTimestamp (see Request.ID), with
// long IDs digested; version 3 keeps the marks of IDs that carry a time
// in segments (marks.go). A version 2 store would not read segments, and
// would count their requests again: it refuses a directory of version 3.
const SchemaVersion = 3

// markMigrationKey holds the key of the last mark that the migration to
// segments went past, committed with the segments it wrote.
var markMigrationKey = []byte{prefixSchema, 0x01}

// markMigrationChunk is how many marks one transaction of the migration
// moves at most.
const markMigrationChunk = 4096

// maxLegacyMarkKey is the longest mark key an older version could have
// written: badger refused longer ones.
const maxLegacyMarkKey = 65000

// schema is the schema record.
type schema struct {
	Version int `json:"version"`
	// LegacyMarksUntil is the hour this directory was first opened by a
	// version 2 store, when it held marks of version 1: requests of that
	// hour or earlier may have been counted under their auditID alone
	// (Request.LegacyID). Zero for a directory that never held any.
	LegacyMarksUntil time.Time `json:"legacyMarksUntil,omitzero"`
	// MarksMigrated is true once every mark of its own whose ID carries a
	// time has been moved into a segment (migrateMarks).
	MarksMigrated bool `json:"marksMigrated,omitempty"`
}

var schemaKey = []byte{prefixSchema}

// openSchema reads the schema record, writing it when the directory has
// none (a new directory, or one an older version wrote) or an older one.
// Marks of schema 1 are not converted (an old mark lacks the timestamp a
// new one is made of); Apply looks for them instead, for requests of the
// hours they can be about, until they expire. Marks of schema 2 whose ID
// carries a time are moved into segments (migrateMarks).
func (s *Store) openSchema() error {
	var sc schema
	found := false
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(schemaKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &sc) })
	})
	if err != nil {
		return fmt.Errorf("store: reading the schema record: %w", err)
	}
	if found && sc.Version > SchemaVersion {
		return fmt.Errorf("store: the data directory was written by a newer Sunset (schema %d, this one reads up to %d); upgrade", sc.Version, SchemaVersion)
	}
	old := false
	if !found {
		if old, err = s.hasMarks(); err != nil {
			return err
		}
		sc = schema{Version: SchemaVersion, MarksMigrated: !old}
		if old {
			sc.LegacyMarksUntil = s.now().UTC().Truncate(time.Hour)
		}
	} else if sc.Version < SchemaVersion {
		sc.Version, sc.MarksMigrated = SchemaVersion, false
	}
	s.legacyMarksUntil = sc.LegacyMarksUntil
	s.marksMigrated = sc.MarksMigrated
	if s.readOnly {
		return nil
	}
	if !found || !sc.MarksMigrated {
		// Written before any segment is, so that an older version
		// refuses the directory from then on.
		if err := s.writeSchema(nil, sc); err != nil {
			// The next Open writes it; until then this one knows it. A
			// full disk must not keep Sunset down.
			s.log.Warn().Err(err).Msg("could not write the store's schema record; writing it at the next start")
			return nil
		}
	}
	if !found && old {
		s.log.Info().Time("legacy_marks_until", sc.LegacyMarksUntil).
			Msg("upgraded the store to identify requests by cluster, auditID and requestReceivedTimestamp; retries of requests counted before are still recognised")
	}
	if !sc.MarksMigrated {
		if err := s.migrateMarks(sc); err != nil {
			// Commits look for the marks not moved yet as well, so
			// nothing is counted twice meanwhile.
			s.log.Warn().Err(err).Msg("could not finish moving dedupe marks into segments; going on at the next start")
		}
	}
	return nil
}

// writeSchema writes sc in txn, or in a transaction of its own when txn
// is nil.
func (s *Store) writeSchema(txn *badger.Txn, sc schema) error {
	val, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	if txn != nil {
		return txn.Set(schemaKey, val)
	}
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(schemaKey, val) })
}

// migrateMarks moves every mark of its own whose ID carries a time into
// segments, a chunk of marks a transaction: the chunk's segments, the
// deletion of its marks, and the key of its last mark
// (markMigrationKey), so that a migration cut short goes on from there
// at the next Open. The marks of other IDs stay. Once done, the schema
// record says so. s.migrateChunks, when positive, stops it after that
// many chunks, as a crash would.
func (s *Store) migrateMarks(sc schema) error {
	var from []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(markMigrationKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		from, err = item.ValueCopy(nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: reading where moving dedupe marks stopped: %w", err)
	}
	start := time.Now()
	moved, chunks := 0, 0
	for {
		if s.migrateChunks > 0 && chunks == s.migrateChunks {
			return errors.New("store: stopped moving dedupe marks as asked")
		}
		n, next, err := s.migrateMarkChunk(from, markMigrationChunk)
		if err != nil {
			return fmt.Errorf("store: moving dedupe marks into segments: %w", s.spaceError(err))
		}
		moved += n
		chunks++
		if next == nil {
			break
		}
		from = next
	}
	sc.MarksMigrated = true
	err = s.db.Update(func(txn *badger.Txn) error {
		if err := s.writeSchema(txn, sc); err != nil {
			return err
		}
		return txn.Delete(markMigrationKey)
	})
	if err != nil {
		return fmt.Errorf("store: recording that dedupe marks were moved: %w", s.spaceError(err))
	}
	s.marksMigrated = true
	if moved > 0 || from != nil {
		s.log.Info().Int("marks", moved).Dur("took", time.Since(start)).Msg("moved the dedupe marks of counted requests into segments")
	}
	return nil
}

// migrateMarkChunk moves up to limit marks after the key from (the
// first ones when nil) in one transaction, halving limit while badger
// finds the transaction too big, and returns how many it moved and the
// key of the last mark it went past, nil once there are no more.
func (s *Store) migrateMarkChunk(from []byte, limit int) (int, []byte, error) {
	type mark struct {
		key []byte
		exp uint64
	}
	var marks []mark
	more := false
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixMark}})
		defer it.Close()
		it.Rewind()
		if from != nil {
			it.Seek(from)
		}
		for ; it.Valid(); it.Next() {
			if from != nil && string(it.Item().Key()) == string(from) {
				continue
			}
			if len(marks) == limit {
				more = true
				break
			}
			marks = append(marks, mark{it.Item().KeyCopy(nil), it.Item().ExpiresAt()})
		}
		return nil
	})
	if err != nil || len(marks) == 0 {
		return 0, nil, err
	}
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	var w segmentWrite
	moved := 0
	for _, m := range marks {
		cluster, id, err := readString(m.key[1:])
		if err != nil {
			continue // not a mark this version wrote; it expires
		}
		sc, ok := scopeOf(cluster, string(id))
		if !ok {
			continue
		}
		w.mark(markRef{scope: sc, hash: markHash(string(id))}, m.exp)
		if err := txn.Delete(m.key); err != nil {
			return s.migrateSmaller(from, limit, err)
		}
		moved++
	}
	last := marks[len(marks)-1].key
	err = w.write(txn, s.marks)
	if err == nil {
		err = txn.Set(markMigrationKey, last)
	}
	if err == nil {
		err = txn.Commit()
	}
	if err != nil {
		return s.migrateSmaller(from, limit, err)
	}
	if !more {
		return moved, nil, nil
	}
	return moved, last, nil
}

// migrateSmaller is migrateMarkChunk again with half the limit when err
// says the transaction was too big.
func (s *Store) migrateSmaller(from []byte, limit int, err error) (int, []byte, error) {
	if errors.Is(err, badger.ErrTxnTooBig) && limit > 1 {
		return s.migrateMarkChunk(from, limit/2)
	}
	return 0, nil, err
}

// hasMarks reports whether any dedupe mark is stored.
func (s *Store) hasMarks() (bool, error) {
	found := false
	err := s.db.View(func(txn *badger.Txn) error {
		for _, p := range []byte{prefixMark, prefixAdmissionMark} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}})
			it.Rewind()
			found = found || it.Valid()
			it.Close()
		}
		return nil
	})
	return found, err
}

// legacyMark is the key of the mark an older version may have written
// for a request of the given hour with that legacy ID, or nil when none
// can exist.
func (s *Store) legacyMark(prefix byte, cluster, legacyID string, hour time.Time) []byte {
	if legacyID == "" || s.legacyMarksUntil.IsZero() || hour.After(s.legacyMarksUntil) {
		return nil
	}
	k := rawMarkKey(prefix, cluster, legacyID)
	if len(k) > maxLegacyMarkKey {
		return nil
	}
	return k
}
