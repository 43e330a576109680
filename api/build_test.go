package api

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
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
		require.NoError(t, b.add(countkey.CountKey{Cluster: "fleet", API: "endpoints.v1",
			Cell: countkey.Cell{Hour: hour, Node: fmt.Sprintf("node-%04d", i), Username: "alice", UserAgent: "kubectl", Verb: "get"}}, n))
	}
	require.NoError(t, b.add(countkey.CountKey{Cluster: "fleet", API: "endpoints.v1",
		Cell: countkey.Cell{Hour: hour.Add(-time.Hour), Node: "node-0000", Username: "bob", UserAgent: "curl", Verb: "list"}}, 5))
	st := b.status("", sunsetv1.DefaultUsersToReport)

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
	require.Equal(t, sunsetv1.PerNodeAPIRequestLog{NodeName: "node-0000", Cluster: "fleet", RequestCount: 5,
		ByUser: []sunsetv1.PerUserAPIRequestCount{{UserName: "bob", UserAgent: "curl", RequestCount: 5,
			ByVerb: []sunsetv1.PerVerbAPIRequestCount{{Verb: "list", RequestCount: 5}}}}}, prev.ByNode[0])
	require.Equal(t, sunsetv1.PerNodeAPIRequestLog{NodeName: "node-0001", Cluster: "fleet", ByUser: []sunsetv1.PerUserAPIRequestCount{}}, prev.ByNode[1],
		"an idle apiserver is listed with 0")

	idle := st.Last24h[(hour.Hour()+1)%24] // 23 hours ago
	require.Equal(t, int64(0), idle.RequestCount)
	require.Len(t, idle.ByNode, MaxNodesPerHour)
	require.Equal(t, int64(total+5), st.RequestCount)
}

// An API nobody called in an hour still has a byNode list, so recipes
// iterating .byNode[] never meet null.
func TestEveryHourHasByNode(t *testing.T) {
	st := newBuilder(buildNow, 0, notSystem).status("", sunsetv1.DefaultUsersToReport)
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
		require.NoError(t, b.add(countkey.CountKey{Cluster: "c", API: "endpoints.v1",
			Cell: countkey.Cell{Hour: hour, Node: "n", Username: "mallory", UserAgent: "fuzz", Verb: verb, DryRun: verb == "frobnicate"}}, n))
	}
	user := b.status("", sunsetv1.DefaultUsersToReport).CurrentHour.ByNode[0].ByUser[0]
	require.Equal(t, []sunsetv1.PerVerbAPIRequestCount{
		{Verb: "deletecollection", RequestCount: 1},
		{Verb: "get", RequestCount: 2},
		{Verb: "other", RequestCount: int64(invented), DryRunCount: 3},
	}, user.ByVerb)
	require.Equal(t, int64(invented+3), user.RequestCount)
}

// topUsersInput is one cell's worth of counts for the top-N tests: keys
// in a fixed order, some clients split over several keys (verbs,
// subresources, dry runs), and ties.
func topUsersInput(hour time.Time) ([]countkey.CountKey, []uint64) {
	var keys []countkey.CountKey
	var counts []uint64
	add := func(node, user, agent, sub, verb string, dry bool, n uint64) {
		keys = append(keys, countkey.CountKey{Cluster: "c", API: "endpoints.v1",
			Cell:    countkey.Cell{Hour: hour, Node: node, Subresource: sub, Username: user, UserAgent: agent, Verb: verb, DryRun: dry},
			Removed: user == "gone"})
		counts = append(counts, n)
	}
	for i := range 30 {
		user := fmt.Sprintf("user-%02d", i)
		// Counts 1 to 10, three clients each: ties broken by name.
		add("n1", user, "kubectl", "", "get", false, uint64(i%10+1))
	}
	// A client split over verbs, a dry run and a subresource, met again
	// after others: 4+3+2+6 = 15, the busiest of n1.
	add("n1", "split", "kubectl", "", "get", false, 4)
	add("n1", "split", "kubectl", "", "list", false, 3)
	add("n1", "split", "kubectl", "", "list", true, 2)
	add("n1", "split", "kubectl", "status", "get", false, 6)
	// One username with two user agents is two clients.
	add("n1", "user-29", "curl", "", "get", false, 10)
	add("n1", "gone", "kubectl", "", "get", false, 1)
	add("n2", "only", "kubectl", "", "watch", false, 7)
	return keys, counts
}

// wantCell is an independent count of one cell: every client's total
// and verbs, all of them sorted as byUser lists them.
func wantCell(keys []countkey.CountKey, counts []uint64, node string) (total int64, users []sunsetv1.PerUserAPIRequestCount) {
	type id struct{ user, agent string }
	byID := map[id]*sunsetv1.PerUserAPIRequestCount{}
	verbs := map[id]map[string][2]int64{}
	for i, k := range keys {
		if k.Node != node {
			continue
		}
		c := int64(counts[i])
		total += c
		u := id{k.Username, k.UserAgent}
		if byID[u] == nil {
			byID[u] = &sunsetv1.PerUserAPIRequestCount{UserName: k.Username, UserAgent: k.UserAgent}
			verbs[u] = map[string][2]int64{}
		}
		byID[u].RequestCount += c
		v := verbs[u][k.Verb]
		v[0] += c
		if k.DryRun {
			v[1] += c
			byID[u].DryRunCount += c
		}
		if k.Removed {
			byID[u].RemovedRequestCount += c
		}
		verbs[u][k.Verb] = v
	}
	for u, e := range byID {
		for verb, v := range verbs[u] {
			e.ByVerb = append(e.ByVerb, sunsetv1.PerVerbAPIRequestCount{Verb: verb, RequestCount: v[0], DryRunCount: v[1]})
		}
		slices.SortFunc(e.ByVerb, func(a, b sunsetv1.PerVerbAPIRequestCount) int { return strings.Compare(a.Verb, b.Verb) })
		users = append(users, *e)
	}
	// A full sort, where the builder keeps a bounded heap.
	sort.Slice(users, func(i, j int) bool {
		a, b := users[i], users[j]
		if a.RequestCount != b.RequestCount {
			return a.RequestCount > b.RequestCount
		}
		if a.UserName != b.UserName {
			return a.UserName < b.UserName
		}
		return a.UserAgent < b.UserAgent
	})
	return total, users
}

// Only the top N clients of a node and hour are listed, chosen by their
// counts over all their keys; totals of the node, the hour and the status
// still include every client. The order the counts arrive in changes
// nothing.
func TestTopUsersAreChosenFromCounts(t *testing.T) {
	hour := buildNow.Truncate(time.Hour)
	keys, counts := topUsersInput(hour)
	var all int64
	for _, n := range counts {
		all += int64(n)
	}
	shuffled := rand.New(rand.NewPCG(1, 2)).Perm(len(keys))
	for _, tc := range []struct {
		users    int
		shuffled bool
	}{{1, false}, {3, false}, {10, false}, {10, true}, {32, false}, {33, true}, {100, false}} {
		t.Run(fmt.Sprintf("users=%d/shuffled=%t", tc.users, tc.shuffled), func(t *testing.T) {
			b := newBuilder(buildNow, 0, notSystem)
			for i := range keys {
				j := i
				if tc.shuffled {
					j = shuffled[i]
				}
				require.NoError(t, b.add(keys[j], counts[j]))
			}
			st := b.status("", tc.users)
			require.Equal(t, all, st.RequestCount)
			require.Equal(t, all, st.CurrentHour.RequestCount)
			require.Equal(t, int64(1), st.RemovedRequestCount)
			require.Equal(t, int64(2), st.DryRunCount)
			require.Len(t, st.CurrentHour.ByNode, 2)
			for _, node := range st.CurrentHour.ByNode {
				total, users := wantCell(keys, counts, node.NodeName)
				require.Equal(t, total, node.RequestCount, node.NodeName)
				shown := min(tc.users, len(users))
				require.Equal(t, users[:shown], node.ByUser, node.NodeName)
				require.Equal(t, len(users)-shown, node.ByUserOmitted, node.NodeName)
			}
			// Workload records are read for the listed clients only.
			var listed []store.ClientID
			for _, node := range st.CurrentHour.ByNode {
				for _, u := range node.ByUser {
					listed = append(listed, store.ClientID{Username: u.UserName, UserAgent: u.UserAgent})
				}
			}
			cmpClients := func(a, b store.ClientID) int {
				return cmp.Or(strings.Compare(a.Username, b.Username), strings.Compare(a.UserAgent, b.UserAgent))
			}
			slices.SortFunc(listed, cmpClients)
			shown := b.shownClients()["c"]
			slices.SortFunc(shown, cmpClients)
			require.Equal(t, listed, shown)
			n1 := st.CurrentHour.ByNode[0].ByUser
			require.Equal(t, "split", n1[0].UserName, "the busiest client, its keys added up")
			require.Equal(t, int64(15), n1[0].RequestCount)
			if tc.users >= 5 {
				var ties [][2]string
				for _, u := range n1[1:5] {
					ties = append(ties, [2]string{u.UserName, u.UserAgent})
				}
				require.Equal(t, [][2]string{{"user-09", "kubectl"}, {"user-19", "kubectl"}, {"user-29", "curl"}, {"user-29", "kubectl"}}, ties,
					"ties of 10 in the order of username, then user agent")
			}
		})
	}
}
