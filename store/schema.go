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
// long IDs digested.
const SchemaVersion = 2

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
}

var schemaKey = []byte{prefixSchema}

// openSchema reads the schema record, writing it when the directory has
// none: a new directory, or one an older version wrote. Marks are not
// converted (an old mark lacks the timestamp a new one is made of);
// Apply looks for them instead, for requests of the hours they can be
// about, until they expire.
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
	if found {
		if sc.Version > SchemaVersion {
			return fmt.Errorf("store: the data directory was written by a newer Sunset (schema %d, this one reads up to %d); upgrade", sc.Version, SchemaVersion)
		}
		s.legacyMarksUntil = sc.LegacyMarksUntil
		return nil
	}
	old, err := s.hasMarks()
	if err != nil {
		return err
	}
	sc = schema{Version: SchemaVersion}
	if old {
		sc.LegacyMarksUntil = s.now().UTC().Truncate(time.Hour)
	}
	s.legacyMarksUntil = sc.LegacyMarksUntil
	if s.readOnly {
		return nil
	}
	val, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(schemaKey, val) }); err != nil {
		// The next Open writes it; until then this one knows it. A
		// full disk must not keep Sunset down.
		s.log.Warn().Err(err).Msg("could not write the store's schema record; writing it at the next start")
		return nil
	}
	if old {
		s.log.Info().Time("legacy_marks_until", sc.LegacyMarksUntil).
			Msg("upgraded the store to identify requests by cluster, auditID and requestReceivedTimestamp; retries of requests counted before are still recognised")
	}
	return nil
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
