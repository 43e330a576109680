package store

import (
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// ScanCursors calls fn, in name order, for up to limit committed cursors
// whose name starts with prefix; fn may keep value. Besides input
// positions, a cursor can hold any small value that must commit atomically
// with counts: the fleet's outbox keeps requests waiting to be sent to
// Kafka this way.
func (s *Store) ScanCursors(prefix string, limit int, fn func(name string, value []byte) error) error {
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: encodeCursorKey(prefix), PrefetchValues: true, PrefetchSize: min(limit, 100)})
		defer it.Close()
		n := 0
		for it.Rewind(); it.Valid() && n < limit; it.Next() {
			item := it.Item()
			val, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := fn(string(item.Key()[1:]), val); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: reading cursors %s*: %w", prefix, err)
	}
	return nil
}

// DeleteCursors removes cursors in one durable transaction.
func (s *Store) DeleteCursors(names ...string) error {
	if len(names) == 0 {
		return nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, n := range names {
		if err := wb.Delete(encodeCursorKey(n)); err != nil {
			return fmt.Errorf("store: deleting cursor %s: %w", n, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("store: deleting cursors: %w", err)
	}
	return nil
}

// CountCursors counts the cursors whose name starts with prefix.
func (s *Store) CountCursors(prefix string) (int, error) {
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: encodeCursorKey(prefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}
