package store

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// timedID is a request's ID as classify.RequestID makes it: the time it
// was received in Unix nanoseconds, "/", its auditID.
func timedID(at time.Time, auditID string) string {
	return fmt.Sprintf("%d/%s", at.UnixNano(), auditID)
}

// segmentsOf returns, by scope, how many hashes the stored segments hold.
func segmentsOf(t *testing.T, s *Store) map[markScope]int {
	t.Helper()
	out := map[markScope]int{}
	require.NoError(t, s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixMarkSegment}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			sc, err := decodeSegmentKey(it.Item().Key())
			require.NoError(t, err)
			require.NoError(t, it.Item().Value(func(v []byte) error {
				require.Zero(t, len(v)%8)
				out[sc] += len(v) / 8
				return nil
			}))
		}
		return nil
	}))
	return out
}

func TestScopeOfReadsTheTimeAnIDStartsWith(t *testing.T) {
	at := hour19.Add(17*time.Minute + 3*time.Nanosecond)
	for id, want := range map[string]int64{
		timedID(at, "a"):           hour19.Unix(),
		timedID(at, "a/b#field:r"): hour19.Unix(),
		"0/x":                      0,
		"3599999999999/x":          0,
		"3600000000000/x":          3600,
	} {
		sc, ok := scopeOf("c", id)
		require.True(t, ok, id)
		require.Equal(t, markScope{cluster: "c", hour: want}, sc, id)
	}
	for _, id := range []string{"", "/a", "a", "12a/x", "-5/x", "99999999999999999999/x", "sha256:0123", "12"} {
		_, ok := scopeOf("c", id)
		require.False(t, ok, id)
	}
}

func TestSegmentsCountEachRequestOnceAcrossCommitsAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, hour19.Add(30*time.Minute))
	key := countkey.CountKey{Cluster: "c1", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", Verb: "get"}}
	other := key
	other.Cluster = "c2"
	a, b, c := timedID(hour19.Add(time.Minute), "a"), timedID(hour19.Add(2*time.Minute), "b"), timedID(hour19.Add(3*time.Minute), "c")
	// The same auditID at another instant is another request.
	a2 := timedID(hour19.Add(4*time.Minute), "a")

	dup, err := s.Apply([]Request{{ID: a, Key: key}, {ID: b, Key: key}, {ID: a, Key: key}, {ID: a, Key: other}, {ID: a2, Key: key}})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false, true, false, false}, dup)
	dup, err = s.Apply([]Request{{ID: b, Key: key}, {ID: c, Key: key}, {ID: a, Key: other}})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true}, dup)
	require.Equal(t, map[markScope]int{{"c1", hour19.Unix()}: 4, {"c2", hour19.Unix()}: 1}, segmentsOf(t, s))
	require.Equal(t, map[byte]int{prefixCount: 2, prefixMarkSegment: 3, prefixMeta: 2}, keysByKind(t, s),
		"one segment per cluster and commit, no mark of its own")
	require.NoError(t, s.Close())

	s = openTest(t, dir, hour19.Add(30*time.Minute))
	defer s.Close()
	dup, err = s.Apply([]Request{{ID: a, Key: key}, {ID: c, Key: key}, {ID: a2, Key: key}, {ID: a, Key: other}})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true}, dup)
	require.Equal(t, uint64(4), countOf(t, s, "c1", "endpoints.v1"))
	require.Equal(t, uint64(1), countOf(t, s, "c2", "endpoints.v1"))
	seen, err := s.Seen("c1", []string{a, b, c, a2, timedID(hour19, "d")})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true, false}, seen)
}

// A request is looked up by the hour of its ID, not the hour it is
// counted in: a replay moved in time keeps its requests' IDs.
func TestSegmentsAreFoundByTheIDsHourWhereverTheRequestCounts(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	id := timedID(hour19.Add(-48*time.Hour), "moved")
	for i, h := range []time.Time{hour19, hour19.Add(-time.Hour), hour19} {
		key := countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: h}}
		dup, err := s.Apply([]Request{{ID: id, Key: key}})
		require.NoError(t, err)
		require.Equal(t, []bool{i > 0}, dup, "delivery %d", i)
	}
	require.Equal(t, map[markScope]int{{"c", hour19.Add(-48 * time.Hour).Unix()}: 1}, segmentsOf(t, s))
}

// Commits run one at a time, but callers commit from many goroutines:
// a request in two batches committed at once counts once.
func TestSegmentsCountOnceAcrossConcurrentCommits(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	key := countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19}}
	const writers, ids = 8, 500
	var wg sync.WaitGroup
	counted := make([]int, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range ids {
				// Every writer sends every request, in its own order.
				id := timedID(hour19.Add(time.Duration((i*7+w*13)%ids)*time.Second), "x")
				dup, err := s.Apply([]Request{{ID: id, Key: key}})
				if err != nil {
					t.Error(err)
					return
				}
				if !dup[0] {
					counted[w]++
				}
			}
		})
	}
	wg.Wait()
	sum := 0
	for _, n := range counted {
		sum += n
	}
	require.Equal(t, ids, sum)
	require.Equal(t, uint64(ids), countOf(t, s, "c", "a.v1"))
}

// With room for no set in memory, every commit reads its hours again:
// slower, and just as exact.
func TestSegmentsStayExactWhenTheCacheKeepsNothing(t *testing.T) {
	now := hour19.Add(30 * time.Minute)
	s, err := Open(Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }, MarkCacheBytes: 1})
	require.NoError(t, err)
	defer s.Close()
	var reqs []Request
	for h := range 3 {
		hour := hour19.Add(-time.Duration(h) * time.Hour)
		for i := range 10 {
			reqs = append(reqs, Request{ID: timedID(hour.Add(time.Duration(i)*time.Minute), "r"), Key: countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19}}})
		}
	}
	for round := range 3 {
		for _, r := range reqs {
			dup, err := s.Apply([]Request{r})
			require.NoError(t, err)
			require.Equal(t, []bool{round > 0}, dup)
		}
		require.Equal(t, 1, s.marks.lru.Len(), "the last set used stays")
	}
	require.Equal(t, uint64(30), countOf(t, s, "c", "a.v1"))
}

// A request refused within a commit marks nothing: the others of its
// transaction are counted and marked when it is split to find it, and it
// counts once it can be stored.
func TestSegmentsOfARefusedRequestAreNotKept(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	bad := countkey.CountKey{Cluster: "c", API: "bad.v1", Cell: countkey.Cell{Hour: hour19}}
	good := countkey.CountKey{Cluster: "c", API: "good.v1", Cell: countkey.Cell{Hour: hour19}}
	require.NoError(t, s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(encodeCountKey(bad), []byte{1, 2, 3})
	}))
	refused, counted := timedID(hour19, "refused"), timedID(hour19, "counted")
	d, err := s.commitBatch(Batch{Requests: []Request{{ID: refused, Key: bad}, {ID: counted, Key: good}}})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, d.Requests)
	require.Equal(t, []countkey.Skip{countkey.SkipUnstorable, ""}, d.Skipped.Requests)
	require.Equal(t, map[markScope]int{{"c", hour19.Unix()}: 1}, segmentsOf(t, s))

	require.NoError(t, s.db.Update(func(txn *badger.Txn) error { return txn.Delete(encodeCountKey(bad)) }))
	dup, err := s.Apply([]Request{{ID: counted, Key: good}, {ID: refused, Key: bad}})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, dup)
	require.Equal(t, uint64(1), countOf(t, s, "c", "bad.v1"))
	require.Equal(t, uint64(1), countOf(t, s, "c", "good.v1"))
}

// Segments expire with the hour their requests count in; once expired,
// the set in memory forgets them too, and Sweep deletes them.
func TestSegmentsExpireWithTheirHour(t *testing.T) {
	now := hour19.Add(30 * time.Minute)
	s, err := Open(Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	require.NoError(t, err)
	defer s.Close()
	key := countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19}}
	id := timedID(hour19, "a")
	dup, err := s.Apply([]Request{{ID: id, Key: key}})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, dup)
	now = hour19.Add(DefaultRetention + time.Hour - time.Second)
	dup, err = s.Apply([]Request{{ID: id, Key: key}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, dup, "a second before the hour expires")

	now = hour19.Add(DefaultRetention + time.Hour)
	n, err := s.Sweep()
	require.NoError(t, err)
	require.Equal(t, 3, n, "the count, the API's metadata and the segment")
	require.Empty(t, segmentsOf(t, s))
	dup, err = s.Apply([]Request{{ID: id, Key: key}})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, dup, "the set kept in memory expired with its segment")
}

// oldStore writes, as schema 2 did, the dedupe marks of ids in cluster c,
// all of hour19, and a schema record of version 2.
func oldStore(t *testing.T, dir string, ids []string) {
	t.Helper()
	db, err := badger.Open(BadgerOptions(dir))
	require.NoError(t, err)
	val, err := json.Marshal(schema{Version: 2})
	require.NoError(t, err)
	exp := uint64(hour19.Add(DefaultRetention + time.Hour).Unix())
	wb := db.NewWriteBatch()
	require.NoError(t, wb.Set(schemaKey, val))
	for _, id := range ids {
		require.NoError(t, wb.SetEntry(expiringEntry(encodeMarkKey(prefixMark, "c", id), nil, exp)))
	}
	require.NoError(t, wb.Flush())
	require.NoError(t, db.Close())
}

func readSchema(t *testing.T, s *Store) (schema, bool) {
	t.Helper()
	var sc schema
	cursor := false
	require.NoError(t, s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(schemaKey)
		require.NoError(t, err)
		require.NoError(t, item.Value(func(v []byte) error { return json.Unmarshal(v, &sc) }))
		_, err = txn.Get(markMigrationKey)
		cursor = err == nil
		return nil
	}))
	return sc, cursor
}

// Open moves the marks of schema 2 into segments, a chunk a transaction,
// and a migration cut short goes on at the next Open; the marks that
// cannot move (IDs without a time, digested ones) stay and still count.
func TestOpenMovesOldMarksIntoSegmentsResumably(t *testing.T) {
	dir := t.TempDir()
	const timed = 10000
	var ids []string
	for i := range timed {
		ids = append(ids, timedID(hour19.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("id-%d", i)))
	}
	untimed := []string{"/no-time", "plain-audit-id", timedID(hour19, fmt.Sprintf("%0200d", 7))}
	ids = append(ids, untimed...)
	oldStore(t, dir, ids)
	key := countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19}}
	var all []Request
	for _, id := range ids {
		all = append(all, Request{ID: id, Key: key})
	}
	allDup := make([]bool, len(all))
	for i := range allDup {
		allDup[i] = true
	}

	// Stopped after one transaction, as a crash would stop it.
	s, err := open(Options{Dir: dir, Logger: zerolog.Nop(), Now: func() time.Time { return hour19.Add(30 * time.Minute) }}, 1)
	require.NoError(t, err)
	sc, cursor := readSchema(t, s)
	require.Equal(t, schema{Version: 3}, sc)
	require.True(t, cursor)
	// The first chunk went past "/no-time", which sorts first and stays.
	require.Equal(t, map[markScope]int{{"c", hour19.Unix()}: markMigrationChunk - 1}, segmentsOf(t, s))
	require.Equal(t, map[byte]int{prefixMark: len(ids) - (markMigrationChunk - 1), prefixMarkSegment: 1}, keysByKind(t, s))
	require.NoError(t, s.Close())

	s = openTest(t, dir, hour19.Add(30*time.Minute))
	defer s.Close()
	sc, cursor = readSchema(t, s)
	require.Equal(t, schema{Version: 3, MarksMigrated: true}, sc)
	require.False(t, cursor)
	require.Equal(t, map[markScope]int{{"c", hour19.Unix()}: timed}, segmentsOf(t, s))
	require.Equal(t, map[byte]int{prefixMark: len(untimed), prefixMarkSegment: 3}, keysByKind(t, s))
	dup, err := s.Apply(all)
	require.NoError(t, err)
	require.Equal(t, allDup, dup, "every request the old store counted")
	dup, err = s.Apply([]Request{{ID: timedID(hour19, "new"), Key: key}, {ID: "/new-no-time", Key: key}})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, dup)
	require.Equal(t, uint64(2), countOf(t, s, "c", "a.v1"))
}

// Until the migration is done, commits look for the marks not moved yet.
func TestCommitsDuringAnUnfinishedMigrationFindOldMarks(t *testing.T) {
	dir := t.TempDir()
	var ids []string
	for i := range 2 * markMigrationChunk {
		ids = append(ids, timedID(hour19.Add(time.Duration(i)*time.Millisecond), "m"))
	}
	oldStore(t, dir, ids)
	s, err := open(Options{Dir: dir, Logger: zerolog.Nop(), Now: func() time.Time { return hour19.Add(30 * time.Minute) }}, 1)
	require.NoError(t, err)
	defer s.Close()
	require.False(t, s.marksMigrated)
	key := countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19}}
	var reqs []Request
	for _, id := range ids {
		reqs = append(reqs, Request{ID: id, Key: key})
	}
	dup, err := s.Apply(reqs)
	require.NoError(t, err)
	for i, d := range dup {
		require.True(t, d, "request %d", i)
	}
	require.Equal(t, uint64(0), countOf(t, s, "c", "a.v1"))
}

// A segment whose size is not a multiple of 8 is damaged: the requests
// of its hour are skipped as unstorable, as over a damaged count, rather
// than counted again; the others count.
func TestDamagedSegmentSkipsItsHoursRequests(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	sc := markScope{cluster: "c", hour: hour19.Unix()}
	require.NoError(t, s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(s.marks.nextKey(sc), []byte{1, 2, 3})
	}))
	key := countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19}}
	d, err := s.commitBatch(Batch{Requests: []Request{{ID: timedID(hour19, "a"), Key: key}, {ID: timedID(hour19.Add(-time.Hour), "b"), Key: key}}})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, d.Requests)
	require.Equal(t, []countkey.Skip{countkey.SkipUnstorable, ""}, d.Skipped.Requests)
	require.Equal(t, uint64(1), countOf(t, s, "c", "a.v1"))
}

// The sets' bytes are what they hold: a hash counted twice, once read
// with its segment and once added by its commit, is one.
func TestMarkSetsCountEachHashOnce(t *testing.T) {
	m := newMarkSets(1 << 20)
	sc := markScope{cluster: "c", hour: hour19.Unix()}
	m.keep(sc, &markSet{hashes: map[uint64]struct{}{1: {}, 2: {}}})
	require.Equal(t, int64(setBytes+1+2*markBytes), m.bytes)
	m.add(sc, []uint64{2, 3}, 100)
	require.Equal(t, int64(setBytes+1+3*markBytes), m.bytes)
	m.add(markScope{cluster: "c", hour: 0}, []uint64{4}, 100)
	require.Equal(t, int64(setBytes+1+3*markBytes), m.bytes, "a set not kept is not grown")
	_, ok := m.cached(sc, 99)
	require.True(t, ok)
	_, ok = m.cached(sc, 100)
	require.False(t, ok, "expired")
	require.Equal(t, int64(0), m.bytes)
}

// `sunset store verify` checks the files of a store with segments as of
// any other: deep, every block of every table.
func TestVerifyPassesAStoreWithSegments(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, hour19.Add(30*time.Minute))
	var reqs []Request
	for i := range 5000 {
		reqs = append(reqs, Request{ID: timedID(hour19.Add(time.Duration(i)*time.Millisecond), "v"), Key: countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19}}})
	}
	_, err := s.Apply(reqs)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	r, err := Verify(dir, true)
	require.NoError(t, err)
	require.True(t, r.Healthy(), "%v", r.Problems)
	require.Equal(t, 1, r.Tables, "the close flushed the memtable")

	s = openTest(t, dir, hour19.Add(30*time.Minute))
	defer s.Close()
	dup, err := s.Apply(reqs[4999:])
	require.NoError(t, err)
	require.Equal(t, []bool{true}, dup)
}
