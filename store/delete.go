package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// DeleteAPI removes an API's counts, metadata and workload records in one
// cluster, and returns how many requests they held. Dedupe marks stay, so
// re-sent old events are still recognised. With dryRun nothing is removed.
func (s *Store) DeleteAPI(cluster, api string, dryRun bool) (uint64, error) {
	return s.deleteSubject(apiSubject, cluster, api, dryRun)
}

// deleteSubject is DeleteAPI for the subject sub, named name.
func (s *Store) deleteSubject(sub *subject, cluster, name string, dryRun bool) (uint64, error) {
	if s.readOnly {
		return 0, errors.New("store: opened read-only")
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	var requests uint64
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		for _, prefix := range [][]byte{sub.countPrefix(cluster, name), sub.workloadPrefix(cluster, name)} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				keys = append(keys, item.KeyCopy(nil))
				if item.Key()[0] == sub.count {
					if err := item.Value(func(v []byte) error {
						if len(v) == 8 {
							requests += binary.BigEndian.Uint64(v)
						}
						return nil
					}); err != nil {
						it.Close()
						return err
					}
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil || dryRun {
		return requests, err
	}
	if err := s.guardSpace(); err != nil {
		return 0, err
	}
	metaKey := sub.metaKey(cluster, name)
	keys = append(keys, metaKey)
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return 0, fmt.Errorf("store: deleting %s: %w", name, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, s.spaceError(fmt.Errorf("store: deleting %s: %w", name, err))
	}
	if !s.noSync {
		if err := s.db.Sync(); err != nil {
			return 0, err
		}
	}
	s.metaMu.Lock()
	delete(s.meta, string(metaKey))
	s.versions.deleted(string(metaKey))
	s.metaMu.Unlock()
	// The deleted cells' clients are gone too.
	s.clients, s.cachedClients = map[string]map[ClientID]bool{}, 0
	s.rebuildTopology()
	return requests, nil
}
