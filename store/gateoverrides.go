package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// prefixGateOverride keys the upgrades the gate let through by override:
// the prefix, the cluster, a zero byte and the time in big-endian Unix
// nanoseconds, so that a cluster's overrides read in time order. The
// value is a JSON GateOverride.
const prefixGateOverride byte = 0x32

// MaxGateOverrides bounds what GateOverrides returns, newest first:
// overrides are few, and an object whose annotation stays lets every
// later raise through and is recorded each time.
const MaxGateOverrides = 100

// GateOverride is one upgrade the gate let through because the object
// carried the override annotation.
type GateOverride struct {
	Time    time.Time `json:"time"`
	Cluster string    `json:"cluster"`
	// Source is admission or capi.
	Source    string `json:"source"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// User made the change; empty for Cluster API.
	User   string `json:"user,omitempty"`
	Reason string `json:"reason"`
	From   string `json:"from"`
	To     string `json:"to"`
}

func gateOverrideKey(cluster string, t time.Time) []byte {
	k := make([]byte, 0, 1+len(cluster)+1+8)
	k = append(k, prefixGateOverride)
	k = append(k, cluster...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, uint64(t.UnixNano()))
}

// SaveGateOverride keeps o for the retention period, like counts of its
// hour.
func (s *Store) SaveGateOverride(o GateOverride) error {
	if s.readOnly {
		return errors.New("store: opened read-only")
	}
	if len(o.Cluster) > countkey.MaxClusterBytes {
		return fmt.Errorf("store: saving an override: the cluster name is %d bytes, over %d", len(o.Cluster), countkey.MaxClusterBytes)
	}
	if err := s.guardSpace(); err != nil {
		return err
	}
	val, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("store: saving an override: %w", err)
	}
	entry := expiringEntry(gateOverrideKey(o.Cluster, o.Time), val, s.expiresAt(o.Time.UTC().Truncate(time.Hour)))
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.SetEntry(entry) }); err != nil {
		return s.spaceError(fmt.Errorf("store: saving an override of cluster %s: %w", o.Cluster, err))
	}
	return nil
}

// GateOverrides returns cluster's overrides at or after since, newest
// first, at most MaxGateOverrides; every cluster's if cluster is empty. A
// record that does not decode is left out.
func (s *Store) GateOverrides(cluster string, since time.Time) ([]GateOverride, error) {
	if cluster == "" {
		return s.allGateOverrides(since)
	}
	prefix := append(append([]byte{prefixGateOverride}, cluster...), 0)
	out := []GateOverride{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true, PrefetchValues: true})
		defer it.Close()
		// Reverse iteration starts at the largest key at or below the seek
		// key: past every time stamp of the prefix.
		for it.Seek(append(prefix, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)); it.Valid() && len(out) < MaxGateOverrides; it.Next() {
			val, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			var o GateOverride
			// A cluster whose name continues with a zero byte shares the
			// prefix.
			if json.Unmarshal(val, &o) != nil || o.Cluster != cluster {
				continue
			}
			if o.Time.Before(since) {
				break
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading the overrides of cluster %s: %w", cluster, err)
	}
	return out, nil
}

// allGateOverrides is GateOverrides of every cluster: keys order by
// cluster first, so all of them are read and the newest kept.
func (s *Store) allGateOverrides(since time.Time) ([]GateOverride, error) {
	out := []GateOverride{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixGateOverride}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			val, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			var o GateOverride
			if json.Unmarshal(val, &o) != nil || o.Time.Before(since) {
				continue
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading the overrides: %w", err)
	}
	slices.SortStableFunc(out, func(a, b GateOverride) int { return b.Time.Compare(a.Time) })
	return out[:min(len(out), MaxGateOverrides)], nil
}
