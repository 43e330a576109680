package api

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/storetest"
	"github.com/kube-sunset/sunset/store"
)

// An APIRequestCount read from a real store agrees with an independent
// count of the requests written: totals of every hour and node include
// all clients, byUser lists the top ones, and status.workloads describes
// each listed client once. Reading the hours in parallel parts gives the
// same object as reading them in one.
func TestGetFromStoreMatchesAnIndependentCount(t *testing.T) {
	now := time.Now().UTC()
	cur := now.Truncate(time.Hour)
	s, err := store.Open(store.Options{Dir: t.TempDir(), NoSync: true, Logger: zerolog.Nop()})
	require.NoError(t, err)
	defer s.Close()

	const api, users = "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io", 4
	type cellKey struct {
		hour int
		node string
	}
	cellTotals := map[cellKey]int64{}
	clientTotals := map[cellKey]map[string]int64{}
	var dayTotal int64
	var reqs []countkey.Request
	// 26 hours: the two oldest are outside last24h and must not count.
	for h := 25; h >= 0; h-- {
		hour := cur.Add(-time.Duration(h) * time.Hour)
		for n := range 3 {
			node := fmt.Sprintf("master-%d", n)
			for u := range 12 {
				user := fmt.Sprintf("system:serviceaccount:ns:app-%02d", u)
				times := 1 + (u*7+h+n)%5 // the top clients change from cell to cell
				for i := range times {
					r := countkey.Request{ID: fmt.Sprintf("%d-%d-%d-%d", h, n, u, i), RemovedRelease: "1.32",
						Key: countkey.CountKey{Cluster: "c", API: api,
							Cell: countkey.Cell{Hour: hour, Node: node, Username: user, UserAgent: "app/1.0", Verb: []string{"get", "list"}[i%2]}}}
					if u%3 == 0 {
						r.Seen = &countkey.Sighting{PodName: fmt.Sprintf("app-%02d-7d9f8b6c5-x2kqz", u), PodNode: "worker-1", At: hour}
					}
					reqs = append(reqs, r)
					if h < 24 {
						k := cellKey{hour.Hour(), node}
						cellTotals[k]++
						if clientTotals[k] == nil {
							clientTotals[k] = map[string]int64{}
						}
						clientTotals[k][user]++
						dayTotal++
					}
				}
			}
		}
	}
	_, err = storetest.Apply(s, reqs)
	require.NoError(t, err)

	svc := NewService(s, nil, nil, nil, func() time.Time { return now })
	q := sunsetv1.DefaultQuery()
	q.Users = users
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	one, err := svc.Get(api, q)
	require.NoError(t, err)
	runtime.GOMAXPROCS(2)
	parts, err := svc.Get(api, q)
	require.NoError(t, err)
	require.Equal(t, one, parts, "the same object however many parts read it")

	st := one.Status
	require.Equal(t, dayTotal, st.RequestCount)
	listed := map[string]bool{}
	for hi, h := range st.Last24h {
		var hourTotal int64
		require.Len(t, h.ByNode, 3)
		for _, node := range h.ByNode {
			k := cellKey{hi, node.NodeName}
			require.Equal(t, cellTotals[k], node.RequestCount, "hour %d %s", hi, node.NodeName)
			hourTotal += node.RequestCount
			require.Len(t, node.ByUser, users)
			require.Equal(t, len(clientTotals[k])-users, node.ByUserOmitted)
			var shown int64
			inCell := map[string]bool{}
			for _, u := range node.ByUser {
				require.Equal(t, clientTotals[k][u.UserName], u.RequestCount, u.UserName)
				shown += u.RequestCount
				listed[u.UserName], inCell[u.UserName] = true, true
			}
			// No client left out has more requests than one listed.
			last := node.ByUser[len(node.ByUser)-1].RequestCount
			for name, n := range clientTotals[k] {
				if !inCell[name] {
					require.LessOrEqual(t, n, last, "%s is left out of hour %d %s with more requests than a listed client", name, hi, node.NodeName)
				}
			}
			require.Less(t, shown, node.RequestCount, "the node's total includes the clients left out")
		}
		require.Equal(t, hourTotal, h.RequestCount)
	}
	// A workload for each listed client, once: namespace and service
	// account from the username, and the pod for those seen with one.
	var want []string
	for u := range 12 {
		if user := fmt.Sprintf("system:serviceaccount:ns:app-%02d", u); listed[user] {
			want = append(want, user)
		}
	}
	var got []string
	for _, cw := range st.Workloads {
		got = append(got, cw.UserName)
		w := cw.Workload
		require.Equal(t, "ns", w.Namespace)
		var u int
		_, err := fmt.Sscanf(w.ServiceAccount, "app-%02d", &u)
		require.NoError(t, err)
		if u%3 != 0 {
			require.Nil(t, w.Owner)
			require.Empty(t, w.Pods)
			continue
		}
		require.Equal(t, &sunsetv1.Owner{Kind: "Deployment", Name: w.ServiceAccount}, w.Owner)
		require.Equal(t, []sunsetv1.WorkloadPod{{Name: w.ServiceAccount + "-7d9f8b6c5-x2kqz", Node: "worker-1", LastSeen: cur}}, w.Pods)
	}
	require.Equal(t, want, got)
	require.NotEmpty(t, got)
}
