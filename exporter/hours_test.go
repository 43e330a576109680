package exporter

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/storetest"
	"github.com/kube-sunset/sunset/store"
)

// scanLog is the store, with each scan's API and hours written down.
type scanLog struct {
	*store.Store
	scans []string
}

func (l *scanLog) ScanCounts(cluster, api string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error {
	l.scans = append(l.scans, fmt.Sprintf("%s %s-%s", api, from.Format("02T15"), to.Format("02T15")))
	return l.Store.ScanCounts(cluster, api, from, to, fn)
}

func TestScrapesRescanOnlyTheHoursThatMayHaveChanged(t *testing.T) {
	now := hour.Add(10 * time.Minute) // day 21, 19:10
	st := openStore(t, &now)
	q := &scanLog{Store: st}
	c := New(Options{Querier: q, Now: func() time.Time { return now }})
	id := 0
	count := func(api string, h time.Time) {
		t.Helper()
		id++
		_, err := storetest.Apply(st, []countkey.Request{{ID: fmt.Sprint(id),
			Key: countkey.CountKey{Cluster: "prod", API: api, Cell: countkey.Cell{Hour: h, Node: "m0", Username: "alice", Verb: "get"}}}})
		require.NoError(t, err)
	}
	scrape := func(want string) []string {
		t.Helper()
		q.scans = nil
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(usageHeader+want), "sunset_deprecated_requests"))
		return q.scans
	}
	series := func(resource string, n int) string {
		return fmt.Sprintf("sunset_deprecated_requests{cluster=\"prod\",dry_run=\"false\",group=\"\",removed_release=\"\",resource=%q,state=\"deprecated\",subresource=\"\",system=\"false\",verb=\"get\",version=\"v1\"} %d\n", resource, n)
	}

	// The window's first hour (20T20) and the current one.
	count("endpoints.v1", hour.Add(-23*time.Hour))
	count("endpoints.v1", hour)
	count("services.v1", hour)
	require.Equal(t, []string{"endpoints.v1 20T19-21T19", "services.v1 20T19-21T19"},
		scrape(series("endpoints", 2)+series("services", 1)), "the first scrape reads the window and the grace hour")

	require.Empty(t, scrape(series("endpoints", 2)+series("services", 1)), "nothing counted since: nothing read")

	count("endpoints.v1", hour)
	require.Equal(t, []string{"endpoints.v1 21T19-21T19"}, scrape(series("endpoints", 3)+series("services", 1)),
		"counted in the current hour: that hour alone is read again, of that API alone")

	count("services.v1", hour.Add(-5*time.Hour))
	require.Equal(t, []string{"services.v1 20T19-21T19"}, scrape(series("endpoints", 3)+series("services", 2)),
		"a late request of an earlier hour: the API is read again whole")

	// An hour later 20T20 is in the grace period, and 21T20 is new: with
	// nothing counted, nothing is read, and the sums still move.
	now = now.Add(time.Hour)
	require.Empty(t, scrape(series("endpoints", 2)+series("services", 2)))

	// Counted in 21T20: read from 21T20, the hour current at the last
	// scrape, which read nothing.
	count("services.v1", hour.Add(time.Hour))
	require.Equal(t, []string{"services.v1 21T20-21T20"}, scrape(series("endpoints", 2)+series("services", 3)))

	_, err := st.DeleteAPI("prod", "services.v1", false)
	require.NoError(t, err)
	require.Empty(t, scrape(series("endpoints", 2)))
	require.Len(t, c.hours.by, 1, "a deleted API is not kept")

	count("services.v1", hour.Add(time.Hour))
	require.Equal(t, []string{"services.v1 20T20-21T20"}, scrape(series("endpoints", 2)+series("services", 1)),
		"counted again after its deletion, an API is read whole, and only what is left counts")
}
