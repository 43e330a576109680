package querybench

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// The store holds what the generator's rules say, counted apart from it.
func TestFillWritesTheCorpus(t *testing.T) {
	size := Size{Days: 2, Users: 30, Nodes: 2, APIs: 4}
	s, err := store.Open(store.Options{Dir: t.TempDir(), NoSync: true, Logger: zerolog.Nop(), Merge: aggregate.StoreMerge()})
	require.NoError(t, err)
	defer s.Close()
	now := time.Now()
	requests, series, err := Fill(s, size, now)
	require.NoError(t, err)
	// Users 0 to 19 make 1+20/(u+1) requests per node and hour.
	perHour := 0
	for u := range size.Users {
		perHour += 1 + 20/(u+1)
	}
	hours := size.Days * 24
	require.Equal(t, hours*(size.Nodes*perHour+(size.APIs-1)*size.Nodes*2), requests)
	require.Equal(t, hours*(size.Nodes*size.Users+(size.APIs-1)*size.Nodes*2), series)
	require.Len(t, s.APIs(), size.APIs)

	cur := now.UTC().Truncate(time.Hour)
	var got int64
	keys := 0
	require.NoError(t, s.ScanCounts(Cluster, MainAPI, cur.Add(-23*time.Hour), cur, func(_ countkey.CountKey, n uint64) error {
		got += int64(n)
		keys++
		return nil
	}))
	require.Equal(t, MainRequests24h(size), got)
	require.Equal(t, int64(24*size.Nodes*perHour), got)
	require.Equal(t, 24*size.Nodes*size.Users, keys)

	w, err := s.WorkloadsOf(Cluster, MainAPI, []store.ClientID{{Username: Username(0), UserAgent: UserAgent(0)}})
	require.NoError(t, err)
	require.Len(t, w, 1)
	require.NotEmpty(t, w[store.ClientID{Username: Username(0), UserAgent: UserAgent(0)}].Pods)
}
