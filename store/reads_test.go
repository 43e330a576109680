package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// Clusters' read records survive a reopen, are bounded in number and in
// name, and expire with the counts of the hour a cluster was last heard.
func TestClusterReadsAreKeptBoundedAndExpire(t *testing.T) {
	dir := t.TempDir()
	at := time.Now().UTC().Truncate(time.Hour)
	s, err := Open(Options{Dir: dir, Logger: zerolog.Nop(), NoSync: true, Now: func() time.Time { return at }})
	require.NoError(t, err)
	first := at.Add(-23 * time.Hour)
	for i := range MaxClusterReads {
		require.NoError(t, s.SaveClusterReads(fmt.Sprint("c", i), ClusterReads{FirstHeard: first, LastHeard: at}))
	}
	require.ErrorIs(t, s.SaveClusterReads("one-too-many", ClusterReads{FirstHeard: at, LastHeard: at}), ErrClusterReadsFull)
	read := at.Add(-time.Hour)
	require.NoError(t, s.SaveClusterReads("c7", ClusterReads{FirstHeard: first, LastHeard: at, LastRead: read}), "a known cluster is still updated")
	require.EqualError(t, s.SaveClusterReads(strings.Repeat("x", countkey.MaxClusterBytes+1), ClusterReads{}),
		"store: saving reads of a cluster: its name is 254 bytes, over 253")
	require.NoError(t, s.Close())

	s = openTest(t, dir, at)
	all, err := s.LoadClusterReads()
	require.NoError(t, err)
	require.Len(t, all, MaxClusterReads)
	require.Equal(t, ClusterReads{FirstHeard: first, LastHeard: at, LastRead: read}, all["c7"])
	require.Equal(t, ClusterReads{FirstHeard: first, LastHeard: at}, all["c8"])
	require.NoError(t, s.Close())

	s = openTest(t, dir, at.Add(DefaultRetention+time.Hour))
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	all, err = s.LoadClusterReads()
	require.NoError(t, err)
	require.Empty(t, all, "heard last a retention period ago")
}
