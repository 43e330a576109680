package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// A 70,000-byte ID (badger refuses keys over 65,000 bytes) is stored as
// its digest: the request counts, once, with the five beside it.
func TestApplyStoresALongIDAsItsDigest(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	key := countkey.CountKey{Cluster: "c", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n", Username: "u", Verb: "get"}}
	reqs := []Request{{ID: strings.Repeat("x", 70000), Key: key}}
	for i := range 5 {
		reqs = append(reqs, Request{ID: fmt.Sprint(i), Key: key})
	}
	dup, err := s.Apply(reqs)
	require.NoError(t, err)
	require.Equal(t, make([]bool, 6), dup)
	dup, err = s.Apply(reqs)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true, true, true}, dup)
	require.Equal(t, uint64(6), countOf(t, s, "c", "endpoints.v1"))
	seen, err := s.Seen("c", []string{strings.Repeat("x", 70000), strings.Repeat("x", 69999)})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, seen)
	require.Equal(t, "sha256:", countkey.MarkID(strings.Repeat("x", 129))[:7])
	require.Equal(t, strings.Repeat("x", 128), countkey.MarkID(strings.Repeat("x", 128)))
}

// A request with a part of its key over its bound is skipped alone: the
// other five of its commit count, and Commit says which one and why.
func TestCommitSkipsAnUnstorableRequestAlone(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	key := countkey.CountKey{Cluster: "c", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n", Username: "u", Verb: "get"}}
	bad := key
	bad.Node = strings.Repeat("n", 70000)
	reqs := []Request{{ID: "bad", Key: bad}}
	for i := range 5 {
		reqs = append(reqs, Request{ID: fmt.Sprint(i), Key: key})
	}
	d, err := s.commitBatch(Batch{Requests: reqs, Admission: []AdmissionRequest{
		{ID: "a", Cluster: "c", Hour: hour19, Rows: []countkey.AdmissionRow{{Key: countkey.AdmissionKey{Hour: hour19, Cluster: "c", Resource: strings.Repeat("r", 64)}}}},
		{ID: "b", Cluster: "c", Hour: hour19, Rows: []countkey.AdmissionRow{{Key: countkey.AdmissionKey{Hour: hour19, Cluster: "c", Resource: "pods"}, Counts: countkey.AdmissionCounts{Requests: 1}}}},
	}})
	require.NoError(t, err)
	require.Equal(t, make([]bool, 6), d.Requests)
	require.Equal(t, &Skipped{Admission: []countkey.Skip{countkey.SkipTooLong, ""}, Requests: []countkey.Skip{countkey.SkipTooLong, "", "", "", "", ""}, FieldRules: []countkey.Skip{}}, d.Skipped)
	require.Equal(t, uint64(5), countOf(t, s, "c", "endpoints.v1"))
	var admission uint64
	require.NoError(t, s.ScanAdmission(hour19, hour19, func(_ countkey.AdmissionKey, c countkey.AdmissionCounts) error {
		admission += c.Requests
		return nil
	}))
	require.Equal(t, uint64(1), admission)
}

// Clusters and apiservers beyond the caps are counted as "other": exact
// totals, bounded names.
func TestApplyFoldsClustersAndNodesBeyondTheCaps(t *testing.T) {
	now := hour19.Add(30 * time.Minute)
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Logger: zerolog.Nop(), Now: func() time.Time { return now }, MaxClusters: 2, MaxNodes: 2})
	require.NoError(t, err)
	var reqs []Request
	for c := range 4 {
		for n := range 3 {
			k := countkey.CountKey{Cluster: fmt.Sprint("c", c), API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: fmt.Sprint("n", n), Username: "u", Verb: "get"}}
			reqs = append(reqs, Request{ID: fmt.Sprint(c, "/", n), Key: k})
		}
	}
	_, err = s.Apply(reqs)
	require.NoError(t, err)
	nodes := func() map[string][]string {
		out := map[string][]string{}
		for _, info := range s.APIs() {
			for n := range info.Nodes {
				out[info.Cluster] = append(out[info.Cluster], n)
			}
		}
		return out
	}
	want := map[string][]string{"c0": {"n0", "n1", "other"}, "c1": {"n0", "n1", "other"}, "other": {"n0", "n1", "other"}}
	got := nodes()
	for c := range got {
		slices.Sort(got[c])
	}
	require.Equal(t, want, got)
	require.Equal(t, uint64(3), countOf(t, s, "c0", "endpoints.v1"))
	require.Equal(t, uint64(6), countOf(t, s, "other", "endpoints.v1"))
	require.Equal(t, uint64(6), s.FoldedClusters())
	require.Equal(t, uint64(4), s.FoldedNodes(), "n2 of each of the four clusters")
	require.NoError(t, s.Close())

	// After a restart the caps hold the same names.
	s, err = Open(Options{Dir: dir, Logger: zerolog.Nop(), Now: func() time.Time { return now }, MaxClusters: 2, MaxNodes: 2})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Apply([]Request{
		{ID: "new", Key: countkey.CountKey{Cluster: "c9", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n9", Username: "u", Verb: "get"}}},
		{ID: "old", Key: countkey.CountKey{Cluster: "c1", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "u", Verb: "get"}}},
	})
	require.NoError(t, err)
	require.Equal(t, uint64(7), countOf(t, s, "other", "endpoints.v1"))
	require.Equal(t, uint64(4), countOf(t, s, "c1", "endpoints.v1"))
}

// A directory written before requests had more than their auditID for an
// identity holds marks keyed by the auditID alone. After the upgrade, a
// retry of a request counted then is still a duplicate; a new request
// that reuses the auditID after the upgrade hour counts.
func TestOpenKeepsDeduplicatingMarksOfTheOldLayout(t *testing.T) {
	dir := t.TempDir()
	before := hour19.Add(30 * time.Minute)
	// Written as the previous version wrote it: counts and metadata
	// through Apply, marks under the auditID alone, no schema record.
	s := openTest(t, dir, before)
	key := countkey.CountKey{Cluster: "c", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n", Username: "u", Verb: "get"}}
	_, err := s.Apply([]Request{{ID: "old-form-is-rewritten-below", Key: key}})
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(txn *badger.Txn) error {
		for _, k := range [][]byte{rawMarkKey(prefixMark, "c", "old-form-is-rewritten-below"), schemaKey} {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		for _, id := range []string{"a1", "a1#field:rule", "a2"} {
			if err := txn.SetEntry(expiringEntry(rawMarkKey(prefixMark, "c", id), nil, s.expiresAt(hour19))); err != nil {
				return err
			}
		}
		return txn.SetEntry(expiringEntry(rawMarkKey(prefixAdmissionMark, "c", "a1"), nil, s.expiresAt(hour19)))
	}))
	require.NoError(t, s.Close())

	// Upgraded two hours later.
	after := before.Add(2 * time.Hour)
	s = openTest(t, dir, after)
	require.Equal(t, hour19.Add(2*time.Hour), s.legacyMarksUntil)
	later := key
	later.Hour = hour19.Add(3 * time.Hour)
	d, err := s.commitBatch(Batch{
		Requests: []Request{
			{ID: "t1/a1", LegacyID: "a1", Key: key},   // the retry of a counted request
			{ID: "t2/a2", LegacyID: "a2", Key: later}, // a new request after the upgrade, reusing an ID
			{ID: "t3/a3", LegacyID: "a3", Key: key},   // never counted
			{ID: "t1/a1", LegacyID: "a1", Key: key},   // the retry again, in the same batch
			{ID: "t4/a1", LegacyID: "a1", Key: later}, // a1 reused after the upgrade
		},
		FieldRules: []FieldRuleRequest{{ID: "t1/a1#field:rule", LegacyID: "a1#field:rule", Key: FieldRuleKey{Cluster: "c", Rule: "rule", Cell: key.Cell}}},
		Admission:  []AdmissionRequest{{ID: "t1/a1", LegacyID: "a1", Cluster: "c", Hour: hour19, Rows: []countkey.AdmissionRow{{Key: countkey.AdmissionKey{Hour: hour19, Cluster: "c", Resource: "pods"}}}}},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, false, true, false}, d.Requests)
	require.Equal(t, []bool{true}, d.FieldRules)
	require.Equal(t, []bool{true}, d.Admission)
	require.NoError(t, s.Close())

	// The schema record is written once: a later start keeps the hour.
	s = openTest(t, dir, after.Add(48*time.Hour))
	defer s.Close()
	require.Equal(t, hour19.Add(2*time.Hour), s.legacyMarksUntil)
	dup, err := s.Apply([]Request{{ID: "t1/a1", LegacyID: "a1", Key: key}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, dup)

	// A new directory has no old marks to look for.
	fresh := openTest(t, t.TempDir(), after)
	defer fresh.Close()
	require.True(t, fresh.legacyMarksUntil.IsZero())
}

// countOf is every count of api in cluster in hour19.
func countOf(t *testing.T, s *Store, cluster, api string) uint64 {
	t.Helper()
	var n uint64
	require.NoError(t, s.ScanCounts(cluster, api, hour19, hour19.Add(23*time.Hour), func(_ countkey.CountKey, v uint64) error {
		n += v
		return nil
	}))
	return n
}
