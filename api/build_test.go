package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/store"
)

var buildNow = time.Date(2026, 11, 23, 14, 30, 0, 0, time.UTC)

func notSystem(string) bool { return false }

// More apiservers in an hour than OpenShift's schema allows: the busiest
// 512 are listed, the rest counted as omitted, and the totals keep them
// all. Every hour lists the API's apiservers, idle ones with 0.
func TestByNodeKeepsTheBusiestWithinTheSchemaLimit(t *testing.T) {
	const nodes = MaxNodesPerHour + 8
	b := newBuilder(buildNow, 0, notSystem)
	hour := buildNow.Truncate(time.Hour)
	var total int64
	for i := range nodes {
		n := uint64(i + 1) // node-0000 is the least busy
		total += int64(n)
		require.NoError(t, b.add(store.CountKey{Cluster: "fleet", API: "endpoints.v1", Hour: hour,
			Node: fmt.Sprintf("node-%04d", i), Username: "alice", UserAgent: "kubectl", Verb: "get"}, n))
	}
	require.NoError(t, b.add(store.CountKey{Cluster: "fleet", API: "endpoints.v1", Hour: hour.Add(-time.Hour),
		Node: "node-0000", Username: "bob", UserAgent: "curl", Verb: "list"}, 5))
	st := b.status("", DefaultUsersToReport)

	cur := st.CurrentHour
	require.Equal(t, total, cur.RequestCount, "the hour's total keeps every apiserver")
	require.Len(t, cur.ByNode, MaxNodesPerHour)
	require.Equal(t, 8, cur.ByNodeOmitted)
	require.Equal(t, "node-0008", cur.ByNode[0].NodeName, "the 8 least busy are left out; the rest are in name order")
	require.Equal(t, int64(9), cur.ByNode[0].RequestCount)
	require.Equal(t, "node-0519", cur.ByNode[MaxNodesPerHour-1].NodeName)

	prev := st.Last24h[hour.Add(-time.Hour).Hour()]
	require.Equal(t, int64(5), prev.RequestCount)
	require.Len(t, prev.ByNode, MaxNodesPerHour)
	require.Equal(t, 8, prev.ByNodeOmitted)
	require.Equal(t, PerNodeAPIRequestLog{NodeName: "node-0000", Cluster: "fleet", RequestCount: 5,
		ByUser: []PerUserAPIRequestCount{{UserName: "bob", UserAgent: "curl", RequestCount: 5,
			ByVerb: []PerVerbAPIRequestCount{{Verb: "list", RequestCount: 5}}, Workload: nil}}}, prev.ByNode[0])
	require.Equal(t, PerNodeAPIRequestLog{NodeName: "node-0001", Cluster: "fleet", ByUser: []PerUserAPIRequestCount{}}, prev.ByNode[1],
		"an idle apiserver is listed with 0")

	idle := st.Last24h[(hour.Hour()+1)%24] // 23 hours ago
	require.Equal(t, int64(0), idle.RequestCount)
	require.Len(t, idle.ByNode, MaxNodesPerHour)
	require.Equal(t, int64(total+5), st.RequestCount)
}

// An API nobody called in an hour still has a byNode list, so recipes
// iterating .byNode[] never meet null.
func TestEveryHourHasByNode(t *testing.T) {
	st := newBuilder(buildNow, 0, notSystem).status("", DefaultUsersToReport)
	for i, h := range st.Last24h {
		require.NotNil(t, h.ByNode, "hour %d", i)
		require.Empty(t, h.ByNode, "hour %d", i)
	}
}

// Verbs outside the Kubernetes request verbs are grouped as "other", so a
// client lists at most 10 verbs of at most 20 characters, whatever a
// sender invents.
func TestUnknownVerbsAreGroupedAsOther(t *testing.T) {
	b := newBuilder(buildNow, 0, notSystem)
	hour := buildNow.Truncate(time.Hour)
	verbs := map[string]uint64{"get": 2, "deletecollection": 1, "frobnicate": 3, strings.Repeat("x", 64): 4, "GET": 5}
	for i := range 50 {
		verbs[fmt.Sprintf("made-up-%d", i)] = 1
	}
	var invented uint64
	for verb, n := range verbs {
		if verb != "get" && verb != "deletecollection" {
			invented += n
		}
		require.NoError(t, b.add(store.CountKey{Cluster: "c", API: "endpoints.v1", Hour: hour, Node: "n",
			Username: "mallory", UserAgent: "fuzz", Verb: verb, DryRun: verb == "frobnicate"}, n))
	}
	user := b.status("", DefaultUsersToReport).CurrentHour.ByNode[0].ByUser[0]
	require.Equal(t, []PerVerbAPIRequestCount{
		{Verb: "deletecollection", RequestCount: 1},
		{Verb: "get", RequestCount: 2},
		{Verb: "other", RequestCount: int64(invented), DryRunCount: 3},
	}, user.ByVerb)
	require.Equal(t, int64(invented+3), user.RequestCount)
}
