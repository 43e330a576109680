package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

func TestAdmissionRecordsRoundTrip(t *testing.T) {
	for _, k := range []countkey.AdmissionKey{
		{Hour: hour19, Cluster: "prod", Version: "v1", Resource: "pods"},
		{Hour: hour19, Cluster: "a\x00b", Group: "g\x00", Version: "\xff", Resource: "r", Subresource: "s\x00",
			Type: "mutating", Configuration: "c\x00\x01", Webhook: "w\x00"},
	} {
		got, err := decodeAdmissionKey(encodeAdmissionKey(k))
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
	c := countkey.AdmissionCounts{Requests: 1, Calls: 300, Mutations: 2, FailedOpen: 3, Slow: 1, LatencyNanos: 1<<63 - 1,
		Buckets: [countkey.AdmissionBuckets]uint64{0, 0, 1, 0, 0, 7}}
	got, err := decodeAdmissionCounts(encodeAdmissionCounts(c))
	require.NoError(t, err)
	require.Equal(t, c, got)
	for _, bad := range [][]byte{nil, {0x80}, append(encodeAdmissionCounts(c), 0)} {
		_, err := decodeAdmissionCounts(bad)
		require.ErrorIs(t, err, errCorruptKey)
	}
}

// Admission marks survive a restart and are independent of the deprecation
// counter's: the same ID counts once in each.
func TestAdmissionDedupeSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	now := hour19.Add(30 * time.Minute)
	key := countkey.AdmissionKey{Hour: hour19, Cluster: "prod", Version: "v1", Resource: "secrets"}
	req := AdmissionRequest{ID: "id-1", Cluster: "prod", Hour: hour19,
		Rows: []countkey.AdmissionRow{{Key: key, Counts: countkey.AdmissionCounts{Requests: 1, Calls: 1, FailedOpen: 1}}}}
	s := openTest(t, dir, now)
	dup, err := s.ApplyAdmission([]AdmissionRequest{req, req})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, dup)
	dup, err = s.Apply([]Request{{ID: "id-1", Key: countkey.CountKey{Cluster: "prod", API: "secrets.v1", Cell: countkey.Cell{Hour: hour19, Verb: "create"}}}})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, dup)
	require.NoError(t, s.Close())

	s = openTest(t, dir, now)
	defer s.Close()
	dup, err = s.ApplyAdmission([]AdmissionRequest{req})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, dup)
	seen, err := s.AdmissionSeen("prod", []string{"id-1", "id-2"})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, seen)
	seen, err = s.AdmissionSeen("staging", []string{"id-1"})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, seen)

	var rows []countkey.AdmissionCounts
	require.NoError(t, s.ScanAdmission(hour19, hour19, func(k countkey.AdmissionKey, c countkey.AdmissionCounts) error {
		require.Equal(t, key, k)
		rows = append(rows, c)
		return nil
	}))
	require.Equal(t, []countkey.AdmissionCounts{{Requests: 1, Calls: 1, FailedOpen: 1}}, rows)
	require.NoError(t, s.ScanAdmission(hour19.Add(time.Hour), now.Add(time.Hour), func(countkey.AdmissionKey, countkey.AdmissionCounts) error {
		t.Fatal("no counts after 19:00")
		return nil
	}))
}
