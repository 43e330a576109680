package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// ScanCounts shares the strings of equal values between keys; the keys it
// returns are still exactly those written, hostile bytes included, and the
// counts add up to the requests.
func TestScanCountsReturnsTheKeysWritten(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19)
	defer s.Close()
	want := map[countkey.CountKey]uint64{}
	var reqs []Request
	for i, k := range []countkey.CountKey{
		{Cell: countkey.Cell{Node: "n1", Username: "alice", UserAgent: "kubectl", Verb: "get"}},
		{Cell: countkey.Cell{Node: "n1", Username: "alice", UserAgent: "kubectl", Verb: "list"}},
		{Cell: countkey.Cell{Node: "n1", Username: "alice", UserAgent: "kubectl", Verb: "list", DryRun: true}},
		// A value that starts like the one before, and NULs.
		{Cell: countkey.Cell{Node: "n1", Username: "alice\x00", UserAgent: "kubectl", Verb: "list"}},
		{Cell: countkey.Cell{Node: "n1", Username: "alice\x00\x01", UserAgent: "kube\x00ctl", Verb: "list"}},
		{Cell: countkey.Cell{Node: "n1", Subresource: "status", Username: "alice", UserAgent: "kubectl", Verb: "get"}, Removed: true},
		{Cell: countkey.Cell{Node: "n1\x00", Username: "", UserAgent: "", Verb: ""}},
		{Cell: countkey.Cell{Node: "n2", Username: "alice", UserAgent: "kubectl", Verb: "get"}},
	} {
		k.Cluster, k.API, k.Hour = "c", "a.v1", hour19.Add(-time.Duration(i%2)*time.Hour)
		for j := range i + 1 {
			reqs = append(reqs, Request{ID: fmt.Sprintf("%d-%d", i, j), Key: k})
		}
		want[k] = uint64(i + 1)
	}
	_, err := s.Apply(reqs)
	require.NoError(t, err)
	got := map[countkey.CountKey]uint64{}
	require.NoError(t, s.ScanCounts("c", "a.v1", hour19.Add(-time.Hour), hour19, func(k countkey.CountKey, n uint64) error {
		got[k] += n
		return nil
	}))
	require.Equal(t, want, got)
}

// WorkloadsOf reads the records of the clients asked for, and only those.
func TestWorkloadsOfReadsTheClientsAskedFor(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19)
	defer s.Close()
	var reqs []Request
	for i := range 5 {
		user := fmt.Sprintf("system:serviceaccount:ns:app-%d", i)
		reqs = append(reqs, Request{ID: user, Key: countkey.CountKey{Cluster: "c", API: "a.v1",
			Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: user, UserAgent: "app", Verb: "get"}},
			Seen: &countkey.Sighting{PodName: fmt.Sprintf("app-%d-x2kqz", i), At: hour19}})
	}
	_, err := s.Apply(reqs)
	require.NoError(t, err)
	got, err := s.WorkloadsOf("c", "a.v1", []ClientID{
		{"system:serviceaccount:ns:app-1", "app"},
		{"system:serviceaccount:ns:app-3", "app"},
		{"system:serviceaccount:ns:app-3", "other-agent"},
		{"nobody", "app"},
	})
	require.NoError(t, err)
	require.Equal(t, map[ClientID]Workload{
		{"system:serviceaccount:ns:app-1", "app"}: {Pods: []PodSeen{{Name: "app-1-x2kqz", LastSeen: hour19}}},
		{"system:serviceaccount:ns:app-3", "app"}: {Pods: []PodSeen{{Name: "app-3-x2kqz", LastSeen: hour19}}},
	}, got)
	all, err := s.Workloads("c", "a.v1")
	require.NoError(t, err)
	require.Len(t, all, 5)
	require.Equal(t, all[ClientID{"system:serviceaccount:ns:app-1", "app"}], got[ClientID{"system:serviceaccount:ns:app-1", "app"}])
}
