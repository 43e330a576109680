package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Admission webhook counts are a second, independent kind of record: their
// own counts and their own dedupe marks, so a request that is both
// deprecated and seen by webhooks counts once in each.
const (
	prefixAdmission     byte = 0x20
	prefixAdmissionMark byte = 0x21
)

// AdmissionBuckets is the number of latency buckets an AdmissionCounts
// holds. The store does not know their bounds.
const AdmissionBuckets = 6

// AdmissionKey identifies one cell of admission webhook counts: one
// resource of one cluster in one UTC hour, and one webhook. A key with
// empty Type, Configuration and Webhook holds the resource's totals over
// all webhooks.
type AdmissionKey struct {
	Hour                                  time.Time
	Cluster                               string
	Group, Version, Resource, Subresource string
	Type, Configuration, Webhook          string
}

// IsTotal reports whether k holds a resource's totals over all webhooks.
func (k AdmissionKey) IsTotal() bool { return k.Type == "" && k.Configuration == "" && k.Webhook == "" }

// AdmissionCounts are the counts of one cell.
type AdmissionCounts struct {
	// Requests with any webhook annotation.
	Requests uint64
	// Calls, Mutations and FailedOpen count webhook calls.
	Calls, Mutations, FailedOpen uint64
	// Slow counts requests that carried webhook latency, LatencyNanos sums
	// it, and Buckets spreads those requests by it.
	Slow         uint64
	LatencyNanos uint64
	Buckets      [AdmissionBuckets]uint64
}

// Add adds o to c.
func (c *AdmissionCounts) Add(o AdmissionCounts) {
	c.Requests += o.Requests
	c.Calls += o.Calls
	c.Mutations += o.Mutations
	c.FailedOpen += o.FailedOpen
	c.Slow += o.Slow
	c.LatencyNanos += o.LatencyNanos
	for i := range c.Buckets {
		c.Buckets[i] += o.Buckets[i]
	}
}

func (c *AdmissionCounts) fields() []*uint64 {
	f := []*uint64{&c.Requests, &c.Calls, &c.Mutations, &c.FailedOpen, &c.Slow, &c.LatencyNanos}
	for i := range c.Buckets {
		f = append(f, &c.Buckets[i])
	}
	return f
}

func (c AdmissionCounts) encode() []byte {
	b := make([]byte, 0, 24)
	for _, f := range c.fields() {
		b = binary.AppendUvarint(b, *f)
	}
	return b
}

func decodeAdmissionCounts(b []byte) (AdmissionCounts, error) {
	var c AdmissionCounts
	for _, f := range c.fields() {
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

// AdmissionRequest is one request's admission webhook counts, to be added
// once per ID and cluster.
type AdmissionRequest struct {
	ID string
	// LegacyID is the ID a store of schema 1 marked the request with, as
	// Request.LegacyID.
	LegacyID string
	Cluster  string
	Hour     time.Time
	Rows     []AdmissionRow
}

// AdmissionRow adds Counts to the cell Key; Key.Cluster and Key.Hour must
// be the request's.
type AdmissionRow struct {
	Key    AdmissionKey
	Counts AdmissionCounts
}

func encodeAdmissionKey(k AdmissionKey) []byte {
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

func decodeAdmissionKey(b []byte) (AdmissionKey, error) {
	var k AdmissionKey
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

// ApplyAdmission adds each request's rows unless a request with the same ID
// was already counted in its cluster, and reports for each whether it was a
// duplicate. Marks and counts are committed together and fsynced before it
// returns. Requests from an expired hour must be filtered out by the
// caller. A request with a part of a key over its bound, or whose records
// badger or the store refuses alone, is skipped and reported as not a
// duplicate.
func (s *Store) ApplyAdmission(reqs []AdmissionRequest) ([]bool, error) {
	dup, _, err := s.applyAdmission(reqs)
	return dup, err
}

// applyAdmission is ApplyAdmission that also says which requests were
// skipped: nil when none was.
func (s *Store) applyAdmission(reqs []AdmissionRequest) ([]bool, []Skip, error) {
	if s.readOnly {
		return nil, nil, errors.New("store: opened read-only")
	}
	var skipped []Skip
	keep := make([]AdmissionRequest, 0, len(reqs))
	at := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if part, length := admissionTooLong(r); part != "" {
			if skipped == nil {
				skipped = make([]Skip, len(reqs))
			}
			skipped[i] = SkipTooLong
			s.logSkip("admission", part, length, SkipTooLong)
			continue
		}
		keep = append(keep, r)
		at = append(at, i)
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	dup := make([]bool, len(keep))
	err := isolating(len(keep), maxChunk, func(lo, hi int) error {
		if err := s.guardSpace(); err != nil {
			return err
		}
		return s.spaceError(s.applyAdmissionChunk(keep[lo:hi], dup[lo:hi]))
	}, func(j int, err error) {
		if skipped == nil {
			skipped = make([]Skip, len(reqs))
		}
		skipped[at[j]] = skipReason(err)
		s.logRefused("admission", skipped[at[j]], err)
	})
	if err != nil {
		return nil, nil, err
	}
	all := make([]bool, len(reqs))
	for j, i := range at {
		all[i] = dup[j]
	}
	return all, skipped, nil
}

func (s *Store) applyAdmissionChunk(reqs []AdmissionRequest, dup []bool) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	deltas := map[string]AdmissionCounts{}
	var order []string
	expiry := map[string]uint64{}
	seen := map[string]struct{}{}
	for i, r := range reqs {
		mk := encodeMarkKey(prefixAdmissionMark, r.Cluster, r.ID)
		d, err := isDuplicate(txn, mk, seen)
		if err != nil {
			return err
		}
		if !d {
			if d, err = hasMark(txn, s.legacyMark(prefixAdmissionMark, r.Cluster, r.LegacyID, r.Hour)); err != nil {
				return err
			}
		}
		if dup[i] = d; d {
			continue
		}
		exp := s.expiresAt(r.Hour)
		if err := setEntry(txn, expiringEntry(mk, nil, exp)); err != nil {
			return err
		}
		for _, row := range r.Rows {
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
		if err := setEntry(txn, expiringEntry(key, current.encode(), expiry[ck])); err != nil {
			return err
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("store: committing admission counts: %w", err)
	}
	return nil
}

// AdmissionSeen reports, for each ID, whether a request with that ID was
// already counted by ApplyAdmission in the cluster. It only reads: dry runs
// use it.
func (s *Store) AdmissionSeen(cluster string, ids []string) ([]bool, error) {
	return s.seen(ids, func(id string) []byte { return encodeMarkKey(prefixAdmissionMark, cluster, id) })
}

// ScanAdmission calls fn for every admission cell whose hour is in
// [from, to], hour by hour, of every cluster.
func (s *Store) ScanAdmission(from, to time.Time, fn func(AdmissionKey, AdmissionCounts) error) error {
	return s.scanHours([]byte{prefixAdmission}, from, to, func(item *badger.Item) error {
		k, err := decodeAdmissionKey(item.Key())
		if err != nil {
			return err
		}
		var c AdmissionCounts
		if err := item.Value(func(v []byte) error {
			c, err = decodeAdmissionCounts(v)
			return err
		}); err != nil {
			return err
		}
		return fn(k, c)
	})
}
