package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
)

// reportTable checks `sunset report`'s table: one row per API with
// requests in the window that keep accepts, its removal, its counts in the
// current hour, the last 24 hours and the window (since, if not 24h), and
// a top user that made the most requests.
func reportTable(t *testing.T, c *auditcount.Counter, out string, keep filter, since time.Duration, header []string) {
	t.Helper()
	reportTableOf(t, c, out, keep, true, since, header)
}

// reportTableOf is reportTable, whose count columns' headers say whether
// system users are left out.
func reportTableOf(t *testing.T, c *auditcount.Counter, out string, keep filter, excludeSystem bool, since time.Duration, header []string) {
	t.Helper()
	counts := "REQUESTS"
	if excludeSystem {
		counts = "NON-SYSTEM REQUESTS"
	}
	window := auditcount.Window(testNow, since)
	rows := table(t, out, header)
	var names []string
	for _, row := range rows {
		name := row["NAME"]
		names = append(names, name)
		of := auditcount.And(keep, apiIs(name))
		require.Equal(t, c.Count(auditcount.And(of, current)), number(t, row[counts+" (CURRENT HOUR)"]), name)
		require.Equal(t, c.Count(auditcount.And(of, day)), number(t, row[counts+" (24H)"]), name)
		if since != 24*time.Hour {
			require.Equal(t, c.Count(auditcount.And(of, window)), number(t, row[fmt.Sprintf("%s (%dH)", counts, int(since.Hours()))]), name)
		}
		rel, removed := removedIn(c, name)
		want := orElse(rel, "-")
		if removed {
			want += " (removed)"
		}
		require.Equal(t, want, row["REMOVED IN"], name)
		byUser := users(c, auditcount.And(of, window))
		top := slices.Max(slices.Collect(maps.Values(byUser)))
		require.Equal(t, top, byUser[row["TOP USER"]], "%s: %s is not the top user of %v", name, row["TOP USER"], byUser)
	}
	require.Equal(t, apis(c, auditcount.And(keep, window)), names)
}

var (
	requestsRe = regexp.MustCompile(`(?m)^Requests:\s+(\d+) in the last 24h(?: \((\d+) (?:more )?from system users(?:, not shown)?\))?, (\d+) in the current hour$`)
	removedRe  = regexp.MustCompile(`\(already removed: (\d+) requests got 404 in the last 24h\)`)
	peakRe     = regexp.MustCompile(`peak (\d+) requests? in an hour`)
)

// describe checks `sunset report NAME`: its totals, the peak hour, and
// the requests per node and per client.
func describe(t *testing.T, c *auditcount.Counter, out, name string, keep filter) {
	t.Helper()
	of := auditcount.And(keep, apiIs(name), day)
	m := requestsRe.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, c.Count(of), number(t, m[1]))
	require.Equal(t, c.Count(auditcount.And(of, current)), number(t, m[3]))
	if m := removedRe.FindStringSubmatch(out); m != nil {
		require.Equal(t, c.Count(auditcount.And(apiIs(name), day, func(r request) bool { return r.Removed })), number(t, m[1]))
	}
	perHour := map[time.Time]int64{}
	for _, r := range c.Requests {
		if of(r) {
			perHour[r.Hour]++
		}
	}
	require.Equal(t, slices.Max(slices.Collect(maps.Values(perHour))), number(t, peakRe.FindStringSubmatch(out)[1]))
	var sum int64
	for _, row := range table(t, section(t, out, "By node (last 24h):"), nil) {
		n := number(t, row["REQUESTS"])
		require.Equal(t, c.Count(auditcount.And(of, clusterIs(row["CLUSTER"]), func(r request) bool { return r.Node == row["NODE"] })), n, row)
		sum += n
	}
	require.Equal(t, c.Count(of), sum, "every node listed")
	sum = 0
	for _, row := range table(t, section(t, out, "By user (last 24h):"), nil) {
		n := number(t, row["REQUESTS"])
		require.Equal(t, c.Count(auditcount.And(of, func(r request) bool { return r.Username == row["USER"] && r.UserAgent == row["USER AGENT"] })), n, row)
		sum += n
	}
	require.Equal(t, c.Count(of), sum, "every client listed")
}

// object checks an APIRequestCount or a list of them in JSON or YAML.
func object(t *testing.T, c *auditcount.Counter, out string, keep filter) {
	t.Helper()
	b, err := yaml.YAMLToJSON([]byte(out))
	require.NoError(t, err)
	c.RequireAPIRequestCounts(t, testNow, keep, b)
}
