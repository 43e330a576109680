package api

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
)

// tableKey is a count of endpoints.v1 in cluster c.
func tableKey(hour time.Time, node, user, agent, verb string) countkey.CountKey {
	return countkey.CountKey{Cluster: "c", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour, Node: node, Username: user, UserAgent: agent, Verb: verb}}
}

// byUser with users=N: the N busiest clients of each apiserver and hour,
// ties by username then user agent, the rest counted as omitted; the
// window's users likewise, by username; totals keep everyone.
func TestBuildTopNTable(t *testing.T) {
	hour := buildNow.Truncate(time.Hour)
	type count struct {
		node, user, agent, verb string
		n                       uint64
	}
	input := []count{
		{"n1", "dave", "kubectl", "get", 1},
		{"n1", "carol", "kubectl", "list", 3},
		{"n1", "alice", "kubectl", "get", 3},
		{"n1", "bob", "curl", "watch", 3},
		{"n1", "alice", "curl", "get", 2},
		{"n1", "alice", "kubectl", "list", 2}, // alice's kubectl again: 5 in all
		{"n2", "erin", "helm", "create", 4},
	}
	entry := func(user, agent string, verbs ...sunsetv1.PerVerbAPIRequestCount) sunsetv1.PerUserAPIRequestCount {
		u := sunsetv1.PerUserAPIRequestCount{UserName: user, UserAgent: agent, ByVerb: verbs}
		for _, v := range verbs {
			u.RequestCount += v.RequestCount
		}
		return u
	}
	verb := func(name string, n int64) sunsetv1.PerVerbAPIRequestCount {
		return sunsetv1.PerVerbAPIRequestCount{Verb: name, RequestCount: n}
	}
	// n1's clients, busiest first: bob and carol tie at 3, bob first.
	n1 := []sunsetv1.PerUserAPIRequestCount{
		entry("alice", "kubectl", verb("get", 3), verb("list", 2)),
		entry("bob", "curl", verb("watch", 3)),
		entry("carol", "kubectl", verb("list", 3)),
		entry("alice", "curl", verb("get", 2)),
		entry("dave", "kubectl", verb("get", 1)),
	}
	n2 := []sunsetv1.PerUserAPIRequestCount{entry("erin", "helm", verb("create", 4))}
	// The window's users, all nodes and agents together.
	window := []sunsetv1.WindowUser{
		{UserName: "alice", RequestCount: 7, UserAgents: []string{"kubectl", "curl"}},
		{UserName: "erin", RequestCount: 4, UserAgents: []string{"helm"}},
		{UserName: "bob", RequestCount: 3, UserAgents: []string{"curl"}},
		{UserName: "carol", RequestCount: 3, UserAgents: []string{"kubectl"}},
		{UserName: "dave", RequestCount: 1, UserAgents: []string{"kubectl"}},
	}
	for i := range window {
		window[i].LastSeen = hour // every call is in the one hour
	}
	for _, tc := range []struct {
		users                int
		n1, n2               []sunsetv1.PerUserAPIRequestCount
		n1Omitted, n2Omitted int
		windowUsers          []sunsetv1.WindowUser
	}{
		{users: 1, n1: n1[:1], n2: n2, n1Omitted: 4, windowUsers: window[:1]},
		{users: 2, n1: n1[:2], n2: n2, n1Omitted: 3, windowUsers: window[:2]},
		{users: 3, n1: n1[:3], n2: n2, n1Omitted: 2, windowUsers: window[:3]},
		{users: 4, n1: n1[:4], n2: n2, n1Omitted: 1, windowUsers: window[:4]},
		{users: 5, n1: n1, n2: n2, windowUsers: window},
		{users: sunsetv1.DefaultUsersToReport, n1: n1, n2: n2, windowUsers: window},
		{users: sunsetv1.MaxUsersToReport, n1: n1, n2: n2, windowUsers: window},
	} {
		t.Run(fmt.Sprintf("users=%d", tc.users), func(t *testing.T) {
			b := newBuilder(buildNow, 24*time.Hour, notSystem)
			for _, c := range input {
				require.NoError(t, b.add(tableKey(hour, c.node, c.user, c.agent, c.verb), c.n))
			}
			st := b.status("", tc.users)
			require.Equal(t, []sunsetv1.PerNodeAPIRequestLog{
				{NodeName: "n1", Cluster: "c", RequestCount: 14, ByUser: tc.n1, ByUserOmitted: tc.n1Omitted},
				{NodeName: "n2", Cluster: "c", RequestCount: 4, ByUser: tc.n2, ByUserOmitted: tc.n2Omitted},
			}, st.CurrentHour.ByNode)
			require.Equal(t, int64(18), st.RequestCount)
			require.Equal(t, int64(18), st.CurrentHour.RequestCount)
			require.Equal(t, &sunsetv1.Window{Since: "24h0m0s", From: buildNow.Add(-24 * time.Hour).Truncate(time.Hour), RequestCount: 18,
				ClientCount: 5, ByUser: tc.windowUsers}, st.Window)
		})
	}
}

// last24h has 24 entries indexed by the UTC hour of day, covering the
// current hour and the 23 before it, whatever the clock's zone; currentHour
// is the entry of the current hour.
func TestBuildHourIndexTable(t *testing.T) {
	india := time.FixedZone("IST", 5*3600+1800)
	for _, tc := range []struct {
		name string
		now  time.Time
		// hours before now's hour, and the requests in each
		ago     map[int]uint64
		want    map[int]int64 // index of last24h -> requestCount
		current int
	}{
		{"afternoon", time.Date(2026, 11, 23, 14, 30, 0, 0, time.UTC),
			map[int]uint64{0: 1, 1: 2, 14: 3, 15: 4, 23: 5, 24: 100, -1: 100},
			map[int]int64{14: 1, 13: 2, 0: 3, 23: 4, 15: 5}, 14},
		{"just after midnight", time.Date(2026, 11, 23, 0, 5, 0, 0, time.UTC),
			map[int]uint64{0: 1, 1: 2, 23: 3, 24: 100},
			map[int]int64{0: 1, 23: 2, 1: 3}, 0},
		{"last minute of the day", time.Date(2026, 11, 23, 23, 59, 59, 0, time.UTC),
			map[int]uint64{0: 6, 23: 7, 24: 100},
			map[int]int64{23: 6, 0: 7}, 23},
		{"a clock in another zone", time.Date(2026, 11, 23, 0, 10, 0, 0, india), // 18:40 UTC the day before
			map[int]uint64{0: 1, 18: 2, 24: 100},
			map[int]int64{18: 1, 0: 2}, 18},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(tc.now, 0, notSystem)
			cur := tc.now.UTC().Truncate(time.Hour)
			for ago, n := range tc.ago {
				require.NoError(t, b.add(tableKey(cur.Add(-time.Duration(ago)*time.Hour), "n1", "alice", "kubectl", "get"), n))
			}
			st := b.status("", sunsetv1.DefaultUsersToReport)
			require.Len(t, st.Last24h, 24)
			var total int64
			for i, h := range st.Last24h {
				require.Equal(t, tc.want[i], h.RequestCount, "last24h[%d]", i)
				total += tc.want[i]
			}
			require.Equal(t, total, st.RequestCount, "the sum of last24h; hours outside it are left out")
			require.Equal(t, st.Last24h[tc.current], st.CurrentHour)
			require.Equal(t, tc.want[tc.current], st.CurrentHour.RequestCount)
			require.Nil(t, st.Window, "no window without since")
		})
	}
}

// A window of since covers whole hours from the hour since before now up
// to the current hour; the scan reads the union of it and last24h, until
// the current hour.
func TestBuildWindowTable(t *testing.T) {
	now := buildNow // 14:30
	cur := now.Truncate(time.Hour)
	at := func(hoursAgo int) time.Time { return cur.Add(-time.Duration(hoursAgo) * time.Hour) }
	// h+1 requests h hours ago, the hour before as a dry run.
	agos := []int{0, 1, 2, 23, 24, 25, 47, 48, 49, 167, 168, 169}
	for _, tc := range []struct {
		since       time.Duration
		from        time.Time
		scanFrom    time.Time
		windowHours []int // hours ago in the window, oldest first
	}{
		{since: time.Hour, from: at(1), scanFrom: at(23), windowHours: []int{1, 0}},
		{since: 100 * time.Minute, from: at(2), scanFrom: at(23), windowHours: []int{2, 1, 0}}, // 12:50 is in the 12:00 hour
		{since: 24 * time.Hour, from: at(24), scanFrom: at(24), windowHours: []int{24, 23, 2, 1, 0}},
		{since: 48 * time.Hour, from: at(48), scanFrom: at(48), windowHours: []int{48, 47, 25, 24, 23, 2, 1, 0}},
		{since: 168 * time.Hour, from: at(168), scanFrom: at(168), windowHours: []int{168, 167, 49, 48, 47, 25, 24, 23, 2, 1, 0}},
	} {
		t.Run(tc.since.String(), func(t *testing.T) {
			b := newBuilder(now, tc.since, notSystem)
			b.listHours()
			from, to := b.scanRange()
			require.Equal(t, tc.scanFrom, from, "the scan starts with the earlier of the window and last24h")
			require.Equal(t, cur, to, "and ends with the current hour")
			for _, ago := range agos {
				k := tableKey(at(ago), "n1", "alice", "kubectl", "get")
				k.DryRun = ago == 1
				require.NoError(t, b.add(k, uint64(ago+1)))
			}
			st := b.status("", sunsetv1.DefaultUsersToReport)

			var want int64
			var byHour []sunsetv1.HourCount
			for _, ago := range tc.windowHours {
				n := int64(ago + 1)
				want += n
				h := sunsetv1.HourCount{Hour: at(ago), RequestCount: n}
				if ago == 1 {
					h.DryRunCount = n
				}
				byHour = append(byHour, h)
			}
			require.Equal(t, &sunsetv1.Window{Since: tc.since.String(), From: tc.from, RequestCount: want, ClientCount: 1,
				ByUser: []sunsetv1.WindowUser{{UserName: "alice", RequestCount: want, UserAgents: []string{"kubectl"}, LastSeen: at(slices.Min(tc.windowHours))}}, ByHour: byHour}, st.Window)
			require.Equal(t, int64(1+2+3+24), st.RequestCount, "last24h is the same whatever the window")
			require.Equal(t, int64(2), st.DryRunCount)
			require.True(t, b.calledBy("alice"))
			require.False(t, b.calledBy("bob"))
		})
	}
}
