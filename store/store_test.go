package store

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

var hour19 = time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)

func openTest(t *testing.T, dir string, now time.Time) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	require.NoError(t, err)
	return s
}

func TestCountKeyRoundTripsHostileStrings(t *testing.T) {
	for _, k := range []countkey.CountKey{
		{Cluster: "default", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", UserAgent: "kubectl/v1.32.4", Verb: "get"}},
		{Cluster: "", API: "", Cell: countkey.Cell{Hour: time.Unix(0, 0).UTC()}},
		{Cluster: "a\x00b", API: "x\x00\x01y",
			Cell: countkey.Cell{Hour: hour19, Node: "\x00", Subresource: "\xff\x00\xff", Username: "evil\x00\x00", UserAgent: "ua\x00",
				Verb: "list", DryRun: true}},
		{Cluster: "c", API: "ingresses.v1beta1.extensions", Cell: countkey.Cell{Hour: hour19, Verb: "get"}, Removed: true},
	} {
		got, err := decodeCountKey(encodeCountKey(k))
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
	// A NUL in one field can never be confused with the field boundary.
	a := encodeCountKey(countkey.CountKey{Cluster: "a\x00", API: "b", Cell: countkey.Cell{Hour: hour19}})
	b := encodeCountKey(countkey.CountKey{Cluster: "a", API: "\x00b", Cell: countkey.Cell{Hour: hour19}})
	require.NotEqual(t, a, b)

	for _, bad := range [][]byte{nil, {prefixCount}, {prefixCount, 'a', 0x00}, {prefixCount, 'a', 0x00, 0x02}, {prefixMark}} {
		_, err := decodeCountKey(bad)
		require.ErrorIs(t, err, errCorruptKey)
	}
}

func TestApplyDeduplicatesWithinAndAcrossCallsAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, hour19.Add(30*time.Minute))
	key := countkey.CountKey{Cluster: "c1", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", Verb: "get"}}
	other := key
	other.Cluster = "c2"

	dup, err := s.Apply([]Request{{ID: "a", Key: key}, {ID: "b", Key: key}, {ID: "a", Key: key}, {ID: "a", Key: other, RemovedRelease: "1.37"}})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false, true, false}, dup, "an auditID is unique per cluster")
	dup, err = s.Apply([]Request{{ID: "b", Key: key}, {ID: "c", Key: key}})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, dup)
	require.NoError(t, s.Close())

	s = openTest(t, dir, hour19.Add(30*time.Minute))
	defer s.Close()
	dup, err = s.Apply([]Request{{ID: "a", Key: key}, {ID: "c", Key: key}})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, dup)

	var got []uint64
	require.NoError(t, s.ScanCounts("c1", "endpoints.v1", hour19, hour19, func(k countkey.CountKey, n uint64) error {
		require.Equal(t, key, k)
		got = append(got, n)
		return nil
	}))
	require.Equal(t, []uint64{3}, got)
	require.Equal(t, []APIInfo{
		{Cluster: "c1", API: "endpoints.v1", FirstHour: hour19, LastHour: hour19, Nodes: map[string]time.Time{"n1": hour19}},
		{Cluster: "c2", API: "endpoints.v1", RemovedRelease: "1.37", FirstHour: hour19, LastHour: hour19, Nodes: map[string]time.Time{"n1": hour19}},
	}, s.APIs())
}

func TestScanCountsHonoursTheHourRange(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19)
	defer s.Close()
	var reqs []Request
	for h := -3; h <= 1; h++ {
		k := countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19.Add(time.Duration(h) * time.Hour), Verb: "get"}}
		reqs = append(reqs, Request{ID: k.Hour.String(), Key: k})
	}
	// A neighbouring API whose name extends this one's must not leak in.
	reqs = append(reqs, Request{ID: "x", Key: countkey.CountKey{Cluster: "c", API: "a.v1x", Cell: countkey.Cell{Hour: hour19}}})
	_, err := s.Apply(reqs)
	require.NoError(t, err)
	var hours []int
	require.NoError(t, s.ScanCounts("c", "a.v1", hour19.Add(-2*time.Hour), hour19.Add(59*time.Minute), func(k countkey.CountKey, n uint64) error {
		hours = append(hours, k.Hour.Hour())
		return nil
	}))
	require.Equal(t, []int{17, 18, 19}, hours)
}

func TestRetentionExpiresCountsMarksAndAPIs(t *testing.T) {
	dir := t.TempDir()
	now := hour19
	s, err := Open(Options{Dir: dir, Retention: 24 * time.Hour, Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	require.NoError(t, err)
	defer s.Close()
	require.False(t, s.Expired(hour19.Add(-24*time.Hour)))
	require.True(t, s.Expired(hour19.Add(-25*time.Hour)))

	key := countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19.Add(-24 * time.Hour)}}
	_, err = s.Apply([]Request{{ID: "x", Key: key}})
	require.NoError(t, err)
	require.Len(t, s.APIs(), 1)

	// An hour later the record's TTL has passed: badger hides it and the API
	// leaves the list.
	now = now.Add(time.Hour)
	require.True(t, s.Expired(key.Hour))
	require.Empty(t, s.APIs())
}

func TestApplySplitsLargeBatchesIntoSelfContainedTransactions(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19)
	defer s.Close()
	reqs := make([]Request, 3*maxChunk+5)
	for i := range reqs {
		reqs[i] = Request{ID: strconv.Itoa(i), Key: countkey.CountKey{Cluster: "c", API: "a.v1",
			Cell: countkey.Cell{Hour: hour19, Username: []string{"u1", "u2", "u3"}[i%3]}}}
	}
	dup, err := s.Apply(reqs)
	require.NoError(t, err)
	for _, d := range dup {
		require.False(t, d)
	}
	total := map[string]uint64{}
	require.NoError(t, s.ScanCounts("c", "a.v1", hour19, hour19, func(k countkey.CountKey, n uint64) error {
		total[k.Username] += n
		return nil
	}))
	require.Equal(t, map[string]uint64{"u1": 4098, "u2": 4098, "u3": 4097}, total)
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, hour19)
	require.NoError(t, s.Close())
	ro, err := Open(Options{Dir: dir, ReadOnly: true, Logger: zerolog.Nop()})
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Apply([]Request{{ID: "a"}})
	require.EqualError(t, err, "store: opened read-only")
}

// A mistyped --data-dir is told as such, not as a damaged store; a writer
// creates the directory.
func TestReadOnlyOpenOfNoDirectorySaysSo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	_, err := Open(Options{Dir: dir, ReadOnly: true, Logger: zerolog.Nop()})
	require.EqualError(t, err, "store: there is no data directory "+dir+": check --data-dir (a server or a replay creates it)")
	_, statErr := os.Stat(dir)
	require.ErrorIs(t, statErr, os.ErrNotExist, "a read-only open creates nothing")
	s := openTest(t, dir, hour19)
	require.NoError(t, s.Close())
}

// APIs names every apiserver with requests to the API within the retention
// period, with its last hour, survives a reopen, and drops an apiserver
// once its last hour expires.
func TestAPIsListEachAPIsNodesWithinRetention(t *testing.T) {
	dir := t.TempDir()
	early := hour19.Add(-DefaultRetention + 2*time.Hour)
	s := openTest(t, dir, hour19.Add(30*time.Minute))
	_, err := s.Apply([]Request{
		{ID: "a", Key: countkey.CountKey{Cluster: "c", API: "endpoints.v1", Cell: countkey.Cell{Hour: early, Node: "old", Verb: "get"}}},
		{ID: "b", Key: countkey.CountKey{Cluster: "c", API: "endpoints.v1", Cell: countkey.Cell{Hour: early, Node: "busy", Verb: "get"}}},
		{ID: "c", Key: countkey.CountKey{Cluster: "c", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "busy", Verb: "get"}}},
	})
	require.NoError(t, err)
	require.Equal(t, map[string]time.Time{"old": early, "busy": hour19}, s.APIs()[0].Nodes)
	require.NoError(t, s.Close())

	// Three hours later the early hour has expired: "old" is gone, the
	// API and "busy" stay.
	s = openTest(t, dir, hour19.Add(3*time.Hour))
	defer s.Close()
	apis := s.APIs()
	require.Len(t, apis, 1)
	require.Equal(t, map[string]time.Time{"busy": hour19}, apis[0].Nodes)
}

// The store decides nothing of how requests merge into its records: it
// applies Options.Merge, and without one keeps what it was given last.
func TestMergeRulesComeFromOptions(t *testing.T) {
	key := countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "u", Verb: "get"}}
	earlier := key
	earlier.Hour = hour19.Add(-time.Hour)
	reqs := []Request{
		{ID: "1", Key: key, RemovedRelease: "1.40", Seen: &countkey.Sighting{PodName: "p1", At: hour19}},
		{ID: "2", Key: earlier, RemovedRelease: "1.38", Seen: &countkey.Sighting{PodName: "p2", SourceIPs: []string{"10.0.0.1"}, At: earlier.Hour}},
		{ID: "3", Key: key},
	}
	for _, tc := range []struct {
		name    string
		merge   Merge
		release string
		pods    []string
	}{
		{"last given", Merge{}, "1.38", []string{"p2"}},
		{"the options'", Merge{
			RemovedRelease: func(stored string, _ time.Time, given string, _ time.Time) string { return stored + given },
			Sighting:       func(w *Workload, s countkey.Sighting) { w.Pods = append(w.Pods, PodSeen{Name: s.PodName}) },
		}, "1.401.38", []string{"p1", "p2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return hour19 }, Merge: tc.merge})
			require.NoError(t, err)
			defer s.Close()
			_, err = s.Apply(reqs)
			require.NoError(t, err)
			require.Equal(t, tc.release, s.APIs()[0].RemovedRelease)
			w, err := s.Workloads("c", "a.v1")
			require.NoError(t, err)
			var pods []string
			for _, p := range w[ClientID{"u", ""}].Pods {
				pods = append(pods, p.Name)
			}
			require.Equal(t, tc.pods, pods)
		})
	}
}
