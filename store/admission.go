package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// Admission webhook counts are a second, independent kind of record: their
// own counts and their own dedupe marks, so a request that is both
// deprecated and seen by webhooks counts once in each.
const (
	prefixAdmission     byte = 0x20
	prefixAdmissionMark byte = 0x21
)

// admissionFields are c's counts in their stored order.
func admissionFields(c *countkey.AdmissionCounts) []*uint64 {
	f := []*uint64{&c.Requests, &c.Calls, &c.Mutations, &c.FailedOpen, &c.Slow, &c.LatencyNanos}
	for i := range c.Buckets {
		f = append(f, &c.Buckets[i])
	}
	return f
}

func encodeAdmissionCounts(c countkey.AdmissionCounts) []byte {
	b := make([]byte, 0, 24)
	for _, f := range admissionFields(&c) {
		b = binary.AppendUvarint(b, *f)
	}
	return b
}

func decodeAdmissionCounts(b []byte) (countkey.AdmissionCounts, error) {
	var c countkey.AdmissionCounts
	for _, f := range admissionFields(&c) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return c, errCorruptKey
		}
		*f, b = v, b[n:]
	}
	if len(b) != 0 {
		return c, errCorruptKey
	}
	return c, nil
}

func encodeAdmissionKey(k countkey.AdmissionKey) []byte {
	b := make([]byte, 0, 32+len(k.Cluster)+len(k.Group)+len(k.Version)+len(k.Resource)+len(k.Subresource)+
		len(k.Type)+len(k.Configuration)+len(k.Webhook))
	b = append(b, prefixAdmission)
	// Hour first: readers scan a time range across every cluster.
	b = appendHour(b, k.Hour)
	for _, s := range []string{k.Cluster, k.Group, k.Version, k.Resource, k.Subresource, k.Type, k.Configuration, k.Webhook} {
		b = appendString(b, s)
	}
	return b
}

func decodeAdmissionKey(b []byte) (countkey.AdmissionKey, error) {
	var k countkey.AdmissionKey
	if len(b) < 9 || b[0] != prefixAdmission {
		return k, errCorruptKey
	}
	k.Hour = time.Unix(int64(binary.BigEndian.Uint64(b[1:9])), 0).UTC()
	b = b[9:]
	var err error
	for _, f := range []*string{&k.Cluster, &k.Group, &k.Version, &k.Resource, &k.Subresource, &k.Type, &k.Configuration, &k.Webhook} {
		if *f, b, err = readString(b); err != nil {
			return k, err
		}
	}
	if len(b) != 0 {
		return k, errCorruptKey
	}
	return k, nil
}

// applyAdmission adds each admission request's rows unless a request
// with the same ID was already counted in its cluster, and marks the
// outcomes of the others as duplicates; one whose records badger or the
// store refuses alone is skipped. The caller holds applyMu.
func (s *Store) applyAdmission(reqs []entry) error {
	return isolating(len(reqs), maxChunk, func(lo, hi int) error {
		if err := s.guardSpace(); err != nil {
			return err
		}
		return s.spaceError(s.applyAdmissionChunk(reqs[lo:hi]))
	}, func(i int, err error) {
		s.refuse(reqs[i], "admission", err)
	})
}

func (s *Store) applyAdmissionChunk(reqs []entry) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	deltas := map[string]countkey.AdmissionCounts{}
	var order []string
	expiry := map[string]uint64{}
	seen := map[string]struct{}{}
	for _, r := range reqs {
		mk := encodeMarkKey(prefixAdmissionMark, r.Key.Cluster, r.ID)
		d, err := marked(txn, mk, seen)
		if err != nil {
			return err
		}
		if !d {
			if d, err = marked(txn, s.legacyMark(prefixAdmissionMark, r.Key.Cluster, r.LegacyID, r.Key.Hour), nil); err != nil {
				return err
			}
		}
		if r.out.Duplicate = d; d {
			continue
		}
		exp := s.expiresAt(r.Key.Hour)
		if err := setEntry(txn, expiringEntry(mk, nil, exp)); err != nil {
			return err
		}
		for _, row := range r.Admission {
			ck := string(encodeAdmissionKey(row.Key))
			d, ok := deltas[ck]
			if !ok {
				order = append(order, ck)
			}
			d.Add(row.Counts)
			deltas[ck] = d
			expiry[ck] = s.expiresAt(row.Key.Hour)
		}
	}
	// Sorted, so concurrent writers (there are none today) would lock in
	// the same order, and the writes are sequential for badger.
	slices.Sort(order)
	for _, ck := range order {
		key := []byte(ck)
		current := deltas[ck]
		item, err := txn.Get(key)
		switch {
		case err == nil:
			if err := item.Value(func(v []byte) error {
				old, err := decodeAdmissionCounts(v)
				if err != nil {
					return damaged("admission count", err)
				}
				current.Add(old)
				return nil
			}); err != nil {
				return err
			}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return fmt.Errorf("store: reading admission counts: %w", err)
		}
		if err := setEntry(txn, expiringEntry(key, encodeAdmissionCounts(current), expiry[ck])); err != nil {
			return err
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("store: committing admission counts: %w", err)
	}
	return nil
}

// AdmissionSeen reports, for each ID, whether a request with that ID was
// already counted in the cluster. It only reads: dry runs
// use it.
func (s *Store) AdmissionSeen(cluster string, ids []string) ([]bool, error) {
	return s.seen(ids, func(id string) []byte { return encodeMarkKey(prefixAdmissionMark, cluster, id) })
}

// ScanAdmission calls fn for every admission cell whose hour is in
// [from, to], hour by hour, of every cluster.
func (s *Store) ScanAdmission(from, to time.Time, fn func(countkey.AdmissionKey, countkey.AdmissionCounts) error) error {
	return s.scanHours([]byte{prefixAdmission}, from, to, func(item *badger.Item) error {
		k, err := decodeAdmissionKey(item.Key())
		if err != nil {
			return err
		}
		var c countkey.AdmissionCounts
		if err := item.Value(func(v []byte) error {
			c, err = decodeAdmissionCounts(v)
			return err
		}); err != nil {
			return err
		}
		return fn(k, c)
	})
}
