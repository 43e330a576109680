package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// prefixClusterReads keys, per cluster, what the warning about clusters
// whose reads are not logged remembers (aggregate's read watch): the key
// is the prefix and the cluster's name, the value a JSON ClusterReads.
const prefixClusterReads byte = 0x31

// MaxClusterReads bounds the clusters with a ClusterReads record, as
// DefaultMaxClusters bounds those with counts: cluster names come from
// senders.
const MaxClusterReads = DefaultMaxClusters

// ErrClusterReadsFull is returned by SaveClusterReads for a cluster
// without a record once MaxClusterReads clusters have one.
var ErrClusterReadsFull = errors.New("store: the clusters' read records are full")

// ClusterReads is what Sunset has heard of one cluster's audit events,
// reads or not. Its record lives past restarts, so that a cluster whose
// reads are not logged is told a day after the problem starts rather
// than a day after the process does.
type ClusterReads struct {
	// FirstHeard is when the cluster first sent an event.
	FirstHeard time.Time `json:"firstHeard"`
	// LastHeard is when it last sent one.
	LastHeard time.Time `json:"lastHeard"`
	// LastRead is when it last sent a get, list or watch; zero when it
	// never did, so reads have been missing since FirstHeard.
	LastRead time.Time `json:"lastRead,omitzero"`
}

func clusterReadsKey(cluster string) []byte {
	return append([]byte{prefixClusterReads}, cluster...)
}

// SaveClusterReads writes the record of cluster, replacing the one it
// had, in a transaction of its own that is synced as counts are. The
// record expires with counts of its LastHeard hour: a cluster silent for
// the whole retention period is forgotten, like its counts. A cluster
// without a record gets one only while fewer than MaxClusterReads
// clusters have one (else ErrClusterReadsFull); a name longer than
// MaxClusterBytes gets none.
func (s *Store) SaveClusterReads(cluster string, r ClusterReads) error {
	if s.readOnly {
		return errors.New("store: opened read-only")
	}
	if len(cluster) > countkey.MaxClusterBytes {
		return fmt.Errorf("store: saving reads of a cluster: its name is %d bytes, over %d", len(cluster), countkey.MaxClusterBytes)
	}
	if err := s.guardSpace(); err != nil {
		return err
	}
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: saving reads of cluster %s: %w", cluster, err)
	}
	key := clusterReadsKey(cluster)
	entry := expiringEntry(key, val, s.expiresAt(r.LastHeard.UTC().Truncate(time.Hour)))
	// Two calls that each add a cluster may both see room for one more;
	// badger refuses the second commit as a conflict (each read the
	// other's key range), and it is tried again.
	for range 3 {
		err = s.db.Update(func(txn *badger.Txn) error {
			_, err := txn.Get(key)
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
				if n := s.clusterReadsCount(txn); n >= MaxClusterReads {
					return ErrClusterReadsFull
				}
			case err != nil:
				return err
			}
			return txn.SetEntry(entry)
		})
		if !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if errors.Is(err, ErrClusterReadsFull) {
		return err
	}
	if err != nil {
		return s.spaceError(fmt.Errorf("store: saving reads of cluster %s: %w", cluster, err))
	}
	return nil
}

// clusterReadsCount counts the clusters with a record, up to
// MaxClusterReads.
func (s *Store) clusterReadsCount(txn *badger.Txn) int {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixClusterReads}})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid() && n < MaxClusterReads; it.Next() {
		n++
	}
	return n
}

// LoadClusterReads returns the record of every cluster heard within the
// retention period. A record that does not decode (a damaged value) is
// left out: that cluster is heard afresh.
func (s *Store) LoadClusterReads() (map[string]ClusterReads, error) {
	out := map[string]ClusterReads{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixClusterReads}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid() && len(out) < MaxClusterReads; it.Next() {
			item := it.Item()
			val, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			var r ClusterReads
			if json.Unmarshal(val, &r) != nil || s.Expired(r.LastHeard.UTC().Truncate(time.Hour)) {
				continue
			}
			out[string(item.Key()[1:])] = r
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading the clusters' read records: %w", err)
	}
	return out, nil
}
