package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// rows lists the counts of one API as "hour node user verb: n".
func rows(t *testing.T, s *Store, api string) []string {
	t.Helper()
	var out []string
	require.NoError(t, s.ScanCounts("c", api, hour19.Add(-time.Hour), hour19, func(k countkey.CountKey, n uint64) error {
		out = append(out, fmt.Sprintf("%02d %s %s %s: %d", k.Hour.Hour(), k.Node, k.Username, k.Verb, n))
		return nil
	}))
	return out
}

// MaxClients applies per API, node and hour; a client with rows keeps
// them whatever its verb; the cap holds across a reopen and is forgotten
// with a deleted API.
func TestClientCapPerNodeAndHour(t *testing.T) {
	dir := t.TempDir()
	now := hour19.Add(30 * time.Minute)
	open := func() *Store {
		s, err := Open(Options{Dir: dir, Logger: zerolog.Nop(), Now: func() time.Time { return now }, MaxClients: 2})
		require.NoError(t, err)
		return s
	}
	s := open()
	req := func(id, user, node string, hour time.Time, verb string) Request {
		return Request{ID: id, Key: countkey.CountKey{Cluster: "c", API: "endpoints.v1",
			Cell: countkey.Cell{Hour: hour, Node: node, Username: user, UserAgent: "ua", Verb: verb}},
			Seen: &countkey.Sighting{SourceIPs: []string{"10.0.0.1"}, At: now}}
	}
	reqs := []Request{
		req("1", "alice", "n1", hour19, "get"),
		req("2", "bob", "n1", hour19, "get"),
		req("3", "carol", "n1", hour19, "get"),
		req("4", "alice", "n1", hour19, "list"),
		req("5", "dave", "n1", hour19, "list"),
		req("6", "carol", "n2", hour19, "get"),
		req("7", "carol", "n1", hour19.Add(-time.Hour), "get"),
	}
	dup, err := s.Apply(reqs)
	require.NoError(t, err)
	require.Equal(t, make([]bool, 7), dup)
	require.Equal(t, "carol", reqs[2].Key.Username, "the caller's requests are left as they were")
	require.NotNil(t, reqs[2].Seen)
	require.Equal(t, []string{
		"18 n1 carol get: 1",
		"19 n1 alice get: 1",
		"19 n1 alice list: 1",
		"19 n1 bob get: 1",
		"19 n1 other get: 1",
		"19 n1 other list: 1",
		"19 n2 carol get: 1",
	}, rows(t, s, "endpoints.v1"))
	require.Equal(t, uint64(2), s.FoldedClients())
	// Folded requests record no workload for "other".
	w, err := s.Workloads("c", "endpoints.v1")
	require.NoError(t, err)
	require.NotContains(t, w, ClientID{Username: OtherClient, UserAgent: OtherClient})
	require.NoError(t, s.Close())

	// Read back from badger after a reopen.
	s = open()
	_, err = s.Apply([]Request{req("8", "bob", "n1", hour19, "watch"), req("9", "erin", "n1", hour19, "get")})
	require.NoError(t, err)
	require.Equal(t, uint64(1), s.FoldedClients())
	require.Equal(t, []string{
		"18 n1 carol get: 1",
		"19 n1 alice get: 1",
		"19 n1 alice list: 1",
		"19 n1 bob get: 1",
		"19 n1 bob watch: 1",
		"19 n1 other get: 2",
		"19 n1 other list: 1",
		"19 n2 carol get: 1",
	}, rows(t, s, "endpoints.v1"))

	// A reset API starts with room again.
	_, err = s.DeleteAPI("c", "endpoints.v1", false)
	require.NoError(t, err)
	_, err = s.Apply([]Request{req("10", "frank", "n1", hour19, "get"), req("11", "grace", "n1", hour19, "get"), req("12", "heidi", "n1", hour19, "get")})
	require.NoError(t, err)
	require.Equal(t, []string{"19 n1 frank get: 1", "19 n1 grace get: 1", "19 n1 other get: 1"}, rows(t, s, "endpoints.v1"))
	require.NoError(t, s.Close())
}
