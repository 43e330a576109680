package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// unstorableKey is where the requests of these tests count.
var unstorableKey = countkey.CountKey{Cluster: "c", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n", Username: "u", Verb: "get"}}

// A removed release of 9 MiB is over badger's limit on one value (8 MiB,
// the value log's file size): before, badger refused the API's metadata
// record and with it the whole commit, the three good requests and the
// cursor beside it. It is skipped alone as too_large, and the rest
// commits.
func TestCommitSkipsARequestWithA9MiBRemovedRelease(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	var reqs []Request
	for i := range 3 {
		reqs = append(reqs, Request{ID: fmt.Sprint(i), Key: unstorableKey, RemovedRelease: "1.37"})
	}
	// Last, so that the store's default merge rule (the last release
	// given) would keep it.
	reqs = append(reqs, Request{ID: "bad", Key: unstorableKey, RemovedRelease: strings.Repeat("1", 9<<20)})
	d, err := s.commitBatch(Batch{Requests: reqs, Cursors: []countkey.Cursor{{Name: "in", Value: []byte("4")}}})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false, false, false}, d.Requests)
	require.Equal(t, &Skipped{Requests: []countkey.Skip{"", "", "", countkey.SkipTooLarge}, FieldRules: []countkey.Skip{}}, d.Skipped)
	require.Equal(t, uint64(3), countOf(t, s, "c", "endpoints.v1"))
	apis := s.APIs()
	require.Len(t, apis, 1)
	require.Equal(t, "1.37", apis[0].RemovedRelease)
	requireCursor(t, s, "in", "4")

	// A release just over the bound, and a sighting over its own, are
	// skipped the same way.
	d, err = s.commitBatch(Batch{Requests: []Request{
		{ID: "long", Key: unstorableKey, RemovedRelease: strings.Repeat("1", MaxReleaseBytes+1)},
		{ID: "seen", Key: unstorableKey, Seen: &countkey.Sighting{PodName: strings.Repeat("p", MaxSightingBytes+1)}},
		{ID: "fine", Key: unstorableKey, RemovedRelease: strings.Repeat("1", MaxReleaseBytes)},
	}})
	require.NoError(t, err)
	require.Equal(t, []countkey.Skip{countkey.SkipTooLarge, countkey.SkipTooLarge, ""}, d.Skipped.Requests)
	require.Equal(t, uint64(4), countOf(t, s, "c", "endpoints.v1"))
}

// Whatever makes a record too large for badger, here a merge rule that
// grows one client's workload record past 8 MiB, badger is never handed
// it: the request that would write it is skipped alone (too_large), the
// five others of its commit count, and the cursor commits with them.
func TestCommitSkipsARequestWhoseRecordBadgerWouldRefuse(t *testing.T) {
	now := hour19.Add(30 * time.Minute)
	s, err := Open(Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }, Merge: Merge{
		Sighting: func(w *Workload, seen countkey.Sighting) {
			lastSighting(w, seen)
			if seen.PodName == "huge" {
				w.Pods[0].Name = strings.Repeat("p", 9<<20)
			}
		},
	}})
	require.NoError(t, err)
	defer s.Close()
	bad := unstorableKey
	bad.Username = "bad"
	reqs := []Request{{ID: "bad", Key: bad, Seen: &countkey.Sighting{PodName: "huge", At: hour19}}}
	for i := range 5 {
		reqs = append(reqs, Request{ID: fmt.Sprint(i), Key: unstorableKey, Seen: &countkey.Sighting{PodName: "pod", At: hour19}})
	}
	d, err := s.commitBatch(Batch{Requests: reqs, Cursors: []countkey.Cursor{{Name: "in", Value: []byte("6")}}})
	require.NoError(t, err)
	require.Equal(t, []countkey.Skip{countkey.SkipTooLarge, "", "", "", "", ""}, d.Skipped.Requests)
	require.Equal(t, uint64(5), countOf(t, s, "c", "endpoints.v1"))
	requireCursor(t, s, "in", "6")
	w, err := s.Workloads("c", "endpoints.v1")
	require.NoError(t, err)
	require.Equal(t, map[ClientID]Workload{{Username: "u"}: {Pods: []PodSeen{{Name: "pod", LastSeen: hour19}}}}, w)
}

// A damaged count record (a count is 8 bytes) fails every write that
// adds to it, again and again: the request that would is skipped as
// unstorable, and the others of its commit, to another API, count.
func TestCommitSkipsARequestWhoseCountIsDamaged(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	bad := unstorableKey
	bad.API = "ingresses.v1beta1.extensions"
	require.NoError(t, s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(apiSubject.countKey(bad), []byte("abc"))
	}))
	reqs := []Request{{ID: "bad", Key: bad}}
	for i := range 5 {
		reqs = append(reqs, Request{ID: fmt.Sprint(i), Key: unstorableKey})
	}
	// The damaged count last, in the transaction of the cursor.
	reqs = append(reqs[1:], reqs[0])
	d, err := s.commitBatch(Batch{Requests: reqs, Cursors: []countkey.Cursor{{Name: "in", Value: []byte("6")}}})
	require.NoError(t, err)
	require.Equal(t, []countkey.Skip{"", "", "", "", "", countkey.SkipUnstorable}, d.Skipped.Requests)
	requireCursor(t, s, "in", "6")
	require.Equal(t, uint64(5), countOf(t, s, "c", "endpoints.v1"))
	// The skipped request left no mark: it is not a duplicate.
	seen, err := s.Seen("c", []string{"bad", "0"})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, seen)
}

// A cursor must commit with its counts, so one badger would refuse fails
// the commit, before anything is written, with an error that says no
// retry will store it.
func TestCommitRefusesACursorItCannotStore(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	_, err := s.commitBatch(Batch{Requests: []Request{{ID: "1", Key: unstorableKey}},
		Admission: []AdmissionRequest{{ID: "a", Cluster: "c", Hour: hour19, Rows: []countkey.AdmissionRow{{Key: countkey.AdmissionKey{Hour: hour19, Cluster: "c", Resource: "pods"}, Counts: countkey.AdmissionCounts{Requests: 1}}}}},
		Cursors:   []countkey.Cursor{{Name: "outbox", Value: make([]byte, maxValueBytes+1)}}})
	require.ErrorIs(t, err, countkey.ErrUnstorable)
	require.NotErrorIs(t, err, countkey.ErrNoSpace)
	require.Equal(t, uint64(0), countOf(t, s, "c", "endpoints.v1"))
	seen, err := s.AdmissionSeen("c", []string{"a"})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, seen)
	// At badger's limit it is stored.
	_, err = s.commitBatch(Batch{Requests: []Request{{ID: "1", Key: unstorableKey}}, Cursors: []countkey.Cursor{{Name: "outbox", Value: make([]byte, maxValueBytes)}}})
	require.NoError(t, err)
	require.Equal(t, uint64(1), countOf(t, s, "c", "endpoints.v1"))
}

// The store's limits are badger's: a record at them is written, one byte
// over is refused by setEntry before badger sees it, with an error that
// names sizes and never bytes.
func TestSetEntryHoldsBadgersLimits(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	require.Equal(t, int64(maxValueBytes), s.db.Opts().ValueLogFileSize)
	for _, tc := range []struct {
		key, value int
		ok         bool
	}{{maxKeyBytes, 0, true}, {maxKeyBytes + 1, 0, false}, {1, maxValueBytes, true}, {1, maxValueBytes + 1, false}} {
		txn := s.db.NewTransaction(true)
		err := setEntry(txn, badger.NewEntry([]byte(strings.Repeat("k", tc.key)), make([]byte, tc.value)))
		txn.Discard()
		if tc.ok {
			require.NoError(t, err, "key %d, value %d", tc.key, tc.value)
			continue
		}
		require.ErrorIs(t, err, countkey.ErrUnstorable)
		require.Equal(t, countkey.SkipTooLarge, skipReason(err))
		require.NotContains(t, err.Error(), "kkkk")
	}
	// badger's own checks agree: one byte over is refused by badger too.
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	require.Error(t, txn.SetEntry(badger.NewEntry([]byte(strings.Repeat("k", maxKeyBytes+1)), nil)))
	require.Error(t, txn.SetEntry(badger.NewEntry([]byte("k"), make([]byte, maxValueBytes+1))))
}

func requireCursor(t *testing.T, s *Store, name, want string) {
	t.Helper()
	v, ok, err := s.Cursor(name)
	require.NoError(t, err)
	require.True(t, ok, "cursor %s", name)
	require.Equal(t, want, string(v))
}
