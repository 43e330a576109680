package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

func TestVersionsMoveWithWhatACommitCounts(t *testing.T) {
	now := hour19.Add(30 * time.Minute)
	s := openTest(t, t.TempDir(), now)
	defer s.Close()
	key := func(api string, hour time.Time) countkey.CountKey {
		return countkey.CountKey{Cluster: "c1", API: api, Cell: countkey.Cell{Hour: hour, Node: "n1", Username: "alice", Verb: "get"}}
	}
	versions := func() map[string]Versions {
		out := map[string]Versions{}
		for _, info := range s.APIs() {
			out[info.API] = info.Versions
		}
		return out
	}
	apply := func(reqs ...Request) {
		t.Helper()
		_, err := s.Apply(reqs)
		require.NoError(t, err)
	}

	// Two APIs in one commit: one step of the sequence each, Past
	// untouched since both are of the current hour.
	apply(Request{ID: "a", Key: key("endpoints.v1", hour19)}, Request{ID: "b", Key: key("ingresses.v1beta1.extensions", hour19)})
	v := versions()
	require.Len(t, v, 2)
	require.Zero(t, v["endpoints.v1"].Past)
	require.Zero(t, v["ingresses.v1beta1.extensions"].Past)
	require.ElementsMatch(t, []uint64{1, 2}, []uint64{v["endpoints.v1"].Writes, v["ingresses.v1beta1.extensions"].Writes})

	// A late request of the hour before moves Past, of its API only.
	apply(Request{ID: "c", Key: key("endpoints.v1", hour19.Add(-time.Hour))})
	require.Equal(t, Versions{Writes: 3, Past: 3}, versions()["endpoints.v1"])
	require.Equal(t, v["ingresses.v1beta1.extensions"], versions()["ingresses.v1beta1.extensions"])

	// A duplicate counts nothing and moves nothing.
	apply(Request{ID: "c", Key: key("endpoints.v1", hour19.Add(-time.Hour))})
	require.Equal(t, Versions{Writes: 3, Past: 3}, versions()["endpoints.v1"])

	// The current hour again moves Writes alone.
	apply(Request{ID: "d", Key: key("endpoints.v1", hour19)})
	require.Equal(t, Versions{Writes: 4, Past: 3}, versions()["endpoints.v1"])

	// Deleted and counted again, an API's versions never return to
	// values a reader may have kept.
	_, err := s.DeleteAPI("c1", "endpoints.v1", false)
	require.NoError(t, err)
	apply(Request{ID: "e", Key: key("endpoints.v1", hour19)})
	require.Equal(t, Versions{Writes: 6, Past: 5}, versions()["endpoints.v1"])
}
