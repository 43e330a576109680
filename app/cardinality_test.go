package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/lockedbuf"
)

// gathered is one scrape: by metric, the value of each series, keyed by
// its labels as in the exposition format.
type gathered map[string]map[string]float64

// scrape gathers reg. The gauges are computed during a gather (at most once
// per metrics.refresh) and count their overflow then, so a test that reads
// their overflow scrapes twice.
func scrape(t *testing.T, reg *prometheus.Registry) gathered {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := gathered{}
	for _, f := range families {
		m := map[string]float64{}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue()
			m[strings.Join(labels, ",")] = v
		}
		out[f.GetName()] = m
	}
	return out
}

// usage renders the labels of a deprecated-requests series.
func usage(cluster, group, version, resource, removed, verb string) string {
	return fmt.Sprintf(`cluster=%q,dry_run="false",group=%q,removed_release=%q,resource=%q,state="deprecated",subresource="",system="false",verb=%q,version=%q`,
		cluster, group, removed, resource, verb, version)
}

// folded is the series that label sets beyond the cap are added to.
var folded = strings.Replace(usage("other", "other", "other", "other", "other", "other"), `subresource=""`, `subresource="other"`, 1)

// requireMadeUp checks that series holds one request for each of n made-up
// APIs from the first.
func requireMadeUp(t *testing.T, series map[string]float64, cluster string, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		require.Equal(t, 1.0, series[usage(cluster, fmt.Sprintf("g%04d.example.com", i), "v1", "widgets", "", "other")], i)
	}
}

// hostile is a deprecated request to a made-up API with a made-up verb.
func hostile(id, group, verb string) map[string]any {
	return ev(id, "verb", verb, "objectRef", map[string]any{"apiGroup": group, "apiVersion": "v1", "resource": "widgets"})
}

// countIn counts s in what logs holds so far.
func countIn(logs *lockedbuf.Buffer, s string) int { return strings.Count(logs.String(), s) }

// One POST of 2,000 deprecated events with made-up groups and verbs, after
// 5 with names that are no Kubernetes names, and then one request to an
// API the catalog knows: the counter keeps its first 100 label sets and
// folds the rest into one "other" series; the gauge keeps the catalog's
// API first. Sums stay exact, and each overflow is logged once.
func TestHostileBatchStaysWithinTheSeriesCap(t *testing.T) {
	cfg := testConfig(t)
	cfg.Metrics.MaxSeries = 100
	cfg.Metrics.Refresh = time.Hour // computed once, at the first scrape
	var logs lockedbuf.Buffer
	s := startLogging(t, cfg, zerolog.New(&logs))

	items := make([]map[string]any, 0, 2005)
	for i := range 5 {
		items = append(items, hostile(fmt.Sprintf("bad-%d", i), "NOT A GROUP/\u00fc", "frobnicate"))
	}
	for i := range 2000 {
		items = append(items, hostile(fmt.Sprintf("h-%d", i), fmt.Sprintf("g%04d.example.com", i), fmt.Sprintf("verb%d", i)))
	}
	code, body := s.post("/audit/webhook/n", "application/json", eventList(items...))
	require.Equal(t, http.StatusOK, code, string(body))
	require.Contains(t, string(body), `"counted": 2005`)
	code, body = s.post("/audit/webhook/n", "application/json", eventList(ev("fs-1", "objectRef",
		map[string]any{"apiGroup": "flowcontrol.apiserver.k8s.io", "apiVersion": "v1beta3", "resource": "flowschemas"},
		"annotations", map[string]any{"k8s.io/deprecated": "true", "k8s.io/removed-release": "1.32"})))
	require.Equal(t, http.StatusOK, code, string(body))

	scrape(t, s.reg)
	got := scrape(t, s.reg)
	// The counter: first come, first kept. The 5 bad names share one
	// label set; then 99 made-up groups; the other 1,901 and the
	// flowschemas request are folded.
	counter := got["sunset_deprecated_requests_total"]
	require.Len(t, counter, 101)
	require.Equal(t, 5.0, counter[usage("default", "other", "other", "other", "", "other")])
	requireMadeUp(t, counter, "default", 0, 99)
	require.Equal(t, 1902.0, counter[folded])

	// The gauge: the catalog's API first, then the busiest, then by
	// labels; the 1,902 others folded.
	gauge := got["sunset_deprecated_requests"]
	require.Len(t, gauge, 101)
	require.Equal(t, 1.0, gauge[usage("default", "flowcontrol.apiserver.k8s.io", "v1beta3", "flowschemas", "1.32", "list")])
	require.Equal(t, 5.0, gauge[usage("default", "other", "other", "other", "", "other")])
	requireMadeUp(t, gauge, "default", 0, 98)
	require.Equal(t, 1902.0, gauge[folded])

	require.Equal(t, map[string]float64{
		`limit="metrics.max-series",metric="sunset_deprecated_requests"`:       1902,
		`limit="metrics.max-series",metric="sunset_deprecated_requests_total"`: 1902,
	}, got["sunset_metrics_overflow_total"])
	for _, metric := range []string{"sunset_deprecated_requests", "sunset_deprecated_requests_total"} {
		require.Equal(t, 1, countIn(&logs, `"metric":"`+metric+`","limit":"metrics.max-series"`), metric)
	}
	// The store and the API keep every request under its own name.
	require.Equal(t, int64(1), getAPI(t, s, "widgets.v1.g1999.example.com").Status.RequestCount)
}

// Three POSTs of 2,000 made-up APIs, each to a random cluster in the path:
// two clusters keep their names (metrics.max-clusters), the third is
// "other", and the series stay within the cap.
func TestHostileClusterPathsStayWithinTheClusterCap(t *testing.T) {
	cfg := testConfig(t)
	cfg.Metrics.MaxSeries = 100
	cfg.Metrics.MaxClusters = 2
	cfg.Metrics.Refresh = time.Hour
	var logs lockedbuf.Buffer
	s := startLogging(t, cfg, zerolog.New(&logs))
	for b, cluster := range []string{"x7f3a", "q91c2", "m0d4e"} {
		items := make([]map[string]any, 0, 2000)
		for i := range 2000 {
			n := b*2000 + i
			items = append(items, hostile(fmt.Sprintf("h-%d", n), fmt.Sprintf("g%04d.example.com", n), fmt.Sprintf("verb%d", n)))
		}
		code, body := s.post("/audit/webhook/"+cluster+"/n", "application/json", eventList(items...))
		require.Equal(t, http.StatusOK, code, string(body))
	}
	// The path's cluster of a configured cluster is always kept.
	code, body := s.post("/audit/webhook/default/n", "application/json", eventList(ev("ep-1")))
	require.Equal(t, http.StatusOK, code, string(body))

	scrape(t, s.reg)
	got := scrape(t, s.reg)
	counter := got["sunset_deprecated_requests_total"]
	require.Len(t, counter, 101, "100 series and the folded one")
	requireMadeUp(t, counter, "x7f3a", 0, 100)
	require.Equal(t, 5901.0, counter[folded])

	// The gauge keeps the catalog's endpoints.v1 in default first, then
	// (all equally busy) in label order: cluster "other" first.
	gauge := got["sunset_deprecated_requests"]
	require.Len(t, gauge, 101)
	require.Equal(t, 1.0, gauge[usage("default", "", "v1", "endpoints", "", "list")])
	requireMadeUp(t, gauge, "other", 4000, 99)
	require.Equal(t, 5901.0, gauge[folded])

	require.Equal(t, map[string]float64{
		// The third cluster's one batch, as the clusters-without-reads
		// watch heard it.
		`limit="metrics.max-clusters",metric="sunset_cluster_reads_missing"`:     1,
		`limit="metrics.max-clusters",metric="sunset_deprecated_requests"`:       1,
		`limit="metrics.max-clusters",metric="sunset_deprecated_requests_total"`: 2000,
		`limit="metrics.max-series",metric="sunset_deprecated_requests"`:         5901,
		`limit="metrics.max-series",metric="sunset_deprecated_requests_total"`:   5901,
	}, got["sunset_metrics_overflow_total"])
	require.Equal(t, 1, countIn(&logs, `"metric":"sunset_deprecated_requests_total","limit":"metrics.max-clusters"`))
}

// 2,000 users of one API on one node in one hour: the first 5
// (max-clients-per-node-hour) keep their rows, the others are counted as
// client "other"; totals stay exact, other nodes and hours have their own
// room, and the cap holds across a restart.
func TestHostileUsersStayWithinTheClientCap(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxClientsPerNodeHour = 5
	var logs lockedbuf.Buffer
	s := startLogging(t, cfg, zerolog.New(&logs))
	user := func(id, name, stamp string) map[string]any {
		return ev(id, "user", map[string]any{"username": name}, "requestReceivedTimestamp", stamp)
	}
	const hour19, hour18 = "2026-11-21T19:10:00Z", "2026-11-21T18:10:00Z"
	items := make([]map[string]any, 0, 2000)
	for i := range 2000 {
		items = append(items, user(fmt.Sprintf("u-%d", i), fmt.Sprintf("user-%04d", i), hour19))
	}
	code, body := s.post("/audit/webhook/n1", "application/json", eventList(items...))
	require.Equal(t, http.StatusOK, code, string(body))
	code, body = s.post("/audit/webhook/n2", "application/json", eventList(
		user("n2-a", "user-1999", hour19), user("n2-b", "user-1998", hour19), user("n1-18", "user-1997", hour18)))
	require.Equal(t, http.StatusOK, code, string(body))
	code, body = s.post("/audit/webhook/n1", "application/json", eventList(user("n1-18b", "user-1996", hour18)))
	require.Equal(t, http.StatusOK, code, string(body))

	type row struct {
		node, user string
		n          int64
	}
	rows := func() []row {
		var out []row
		ep := getAPI(t, s, "endpoints.v1")
		for _, h := range []int{18, 19} {
			for _, n := range ep.Status.Last24h[h].ByNode {
				var listed int64
				for _, u := range n.ByUser {
					out = append(out, row{fmt.Sprintf("%d/%s", h, n.NodeName), u.UserName + " " + u.UserAgent, u.RequestCount})
					listed += u.RequestCount
				}
				require.Equal(t, n.RequestCount, listed, "every row is listed")
			}
		}
		return out
	}
	want := []row{
		{"18/n1", "user-1996 kubectl/v1.32.4", 1},
		{"18/n2", "user-1997 kubectl/v1.32.4", 1},
		{"19/n1", "other other", 1995},
		{"19/n1", "user-0000 kubectl/v1.32.4", 1},
		{"19/n1", "user-0001 kubectl/v1.32.4", 1},
		{"19/n1", "user-0002 kubectl/v1.32.4", 1},
		{"19/n1", "user-0003 kubectl/v1.32.4", 1},
		{"19/n1", "user-0004 kubectl/v1.32.4", 1},
		{"19/n2", "user-1998 kubectl/v1.32.4", 1},
		{"19/n2", "user-1999 kubectl/v1.32.4", 1},
	}
	require.Equal(t, want, rows())
	require.Equal(t, 1995.0, scrape(t, s.reg)["sunset_store_clients_overflow_total"][""])

	// After a restart the cap is read back from the store: a new user is
	// folded, a known one keeps its row.
	s = s.restart()
	code, body = s.post("/audit/webhook/n1", "application/json", eventList(user("r-1", "user-0001", hour19), user("r-2", "newcomer", hour19)))
	require.Equal(t, http.StatusOK, code, string(body))
	want[2].n, want[4].n = 1996, 2
	want[3], want[4] = want[4], want[3] // user-0001 now leads the users
	require.Equal(t, want, rows())
	require.Equal(t, 1.0, scrape(t, s.reg)["sunset_store_clients_overflow_total"][""])
	require.Equal(t, 1, countIn(&logs, "max-clients-per-node-hour in one node and hour"), "logged once per process")
}
