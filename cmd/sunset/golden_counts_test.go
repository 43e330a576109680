package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
)

// The numbers of every golden file here are checked against a count of the
// fixture's input made independently of Sunset (internal/testutil/auditcount): a
// golden file records what Sunset printed, and this says it is right.

type request = auditcount.Request

type filter = func(request) bool

// fixtureCount counts fixtureBatches.
func fixtureCount(t *testing.T) *auditcount.Counter {
	t.Helper()
	c := auditcount.New(auditcount.Options{SystemUsers: config.Default().SystemUsers, Lifecycle: auditcount.BuiltinLifecycle(t)})
	for _, b := range fixtureBatches(t) {
		c.AddList(t, b.cluster, b.node, b.body)
	}
	return c
}

var (
	day     = auditcount.Last24h(testNow)
	current = auditcount.Hour(testNow.Truncate(time.Hour))
	all     = func(request) bool { return true }
)

func apiIs(name string) filter     { return func(r request) bool { return r.API == name } }
func clusterIs(name string) filter { return func(r request) bool { return r.Cluster == name } }

// apis are the APIs with requests keep accepts, sorted.
func apis(c *auditcount.Counter, keep filter) []string {
	return slices.Sorted(maps.Keys(c.ByAPI(keep)))
}

// removedIn is the release that removes an API, as its requests say, and
// whether clients got 404s from it already.
func removedIn(c *auditcount.Counter, name string) (string, bool) {
	rel, removed := "", false
	for _, r := range c.Requests {
		if r.API == name {
			rel = orElse(rel, r.RemovedIn)
			removed = removed || r.Removed
		}
	}
	return rel, removed
}

// orElse is a, or b when a is empty.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// users counts the requests keep accepts per username.
func users(c *auditcount.Counter, keep filter) map[string]int64 {
	out := map[string]int64{}
	for _, r := range c.Requests {
		if keep(r) {
			out[r.Username]++
		}
	}
	return out
}

var columnsRe = regexp.MustCompile(`\S+(?: \S+)*`)

// table reads rows whose cells are separated by two spaces or more, by
// the column names of header, or of the first line when header is nil.
func table(t *testing.T, text string, header []string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if header == nil {
		header, lines = columnsRe.FindAllString(lines[0], -1), lines[1:]
	}
	var rows []map[string]string
	for _, l := range lines {
		cells := columnsRe.FindAllString(l, -1)
		require.Len(t, cells, len(header), "%q has not the columns %q", l, header)
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		rows = append(rows, row)
	}
	return rows
}

func number(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "%q is not a count", s)
	return n
}

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

// section is the lines under a title up to a blank line.
func section(t *testing.T, out, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\n"+title+"\n")
	require.True(t, ok, "no %q in\n%s", title, out)
	body, _, _ := strings.Cut(rest, "\n\n")
	return body
}

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

// blocked says whether an upgrade to target breaks an API's clients: it is
// removed at or before target, or its clients get 404s already.
func blocked(c *auditcount.Counter, name, target string) bool {
	rel, removed := removedIn(c, name)
	return removed || rel != "" && !auditcount.ReleaseLess(target, rel)
}

var (
	warningRe = regexp.MustCompile(`^Warning: (.*) \((\d+) requests? in (\d+h) by (\d+) clients?: ([^)]*)\)(?: \[already removed: clients get 404\])?$`)
	verdictRe = regexp.MustCompile(`(\d+) APIs? removed in or before [0-9.]+ (?:was|were) requested|(\d+) deprecated APIs? (?:was|were)`)
)

// checkText checks `sunset check`: a warning per API with requests in the
// window, each with its requests and clients, and the count of APIs in the
// verdict.
func checkText(t *testing.T, c *auditcount.Counter, out string, keep filter, target string) {
	t.Helper()
	// The warnings name no API; check-json.golden tells which is which.
	var doc struct {
		Findings []struct{ Name, Warning string }
	}
	b, err := os.ReadFile("testdata/check-json.golden")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	byWarning := map[string]string{}
	for _, f := range doc.Findings {
		byWarning[f.Warning] = f.Name
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var names []string
	blockers := 0
	for _, l := range lines[:len(lines)-1] {
		m := warningRe.FindStringSubmatch(l)
		require.NotNil(t, m, l)
		name := byWarning[m[1]]
		require.NotEmpty(t, name, l)
		names = append(names, name)
		requireClients(t, c, auditcount.And(keep, apiIs(name), auditcount.Window(testNow, 24*time.Hour)), m[2], m[4], strings.Split(m[5], ", "))
		if blocked(c, name, target) {
			blockers++
		}
	}
	slices.Sort(names)
	require.Equal(t, apis(c, auditcount.And(keep, auditcount.Window(testNow, 24*time.Hour))), names)
	m := verdictRe.FindStringSubmatch(lines[len(lines)-1])
	require.NotNil(t, m, lines[len(lines)-1])
	switch {
	case m[1] != "":
		require.Equal(t, int64(blockers), number(t, m[1]), lines[len(lines)-1])
	default:
		require.Zero(t, blockers)
		require.Equal(t, int64(len(names)), number(t, m[2]), lines[len(lines)-1])
	}
}

// requireClients checks a finding's requests, number of clients and the
// clients it names (the busiest first, "..." for more).
func requireClients(t *testing.T, c *auditcount.Counter, keep filter, requests, clients string, named []string) {
	t.Helper()
	byUser := users(c, keep)
	require.Equal(t, c.Count(keep), number(t, requests))
	require.Equal(t, int64(len(byUser)), number(t, clients))
	prev := int64(-1)
	for _, u := range named {
		if u == "..." {
			continue
		}
		n, ok := byUser[u]
		require.True(t, ok, "%s made no request in %v", u, byUser)
		require.True(t, prev < 0 || n <= prev, "%v: busiest first", named)
		prev = n
	}
}

// checkJSON checks `sunset check -o json`.
func checkJSON(t *testing.T, c *auditcount.Counter, out string, keep filter, target string, since time.Duration) {
	t.Helper()
	var doc struct {
		Findings []struct {
			Name, Severity string
			Requests       int64
			ClientCount    int64
			Clients        []string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	window := auditcount.And(keep, auditcount.Window(testNow, since))
	var names []string
	for _, f := range doc.Findings {
		names = append(names, f.Name)
		requireClients(t, c, auditcount.And(window, apiIs(f.Name)), strconv.FormatInt(f.Requests, 10), strconv.FormatInt(f.ClientCount, 10), f.Clients)
		require.Equal(t, map[bool]string{true: "removed", false: "deprecated"}[blocked(c, f.Name, target)], f.Severity, f.Name)
	}
	slices.Sort(names)
	require.Equal(t, apis(c, window), names)
}

// webhookCount is fixtureCount with webhookFixture's crafted admission
// events.
func webhookCount(t *testing.T) *auditcount.Counter {
	t.Helper()
	c := fixtureCount(t)
	c.AddFile(t, "prod", "master-0", "../../admission/testdata/crafted-events.jsonl")
	return c
}

// securityResources are README's default security class.
var securityResources = []string{"secrets", "serviceaccounts", "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "tokenreviews", "certificatesigningrequests"}

// webhookTables checks `sunset report webhooks`: a table of resources (if
// resources) and one of webhooks on resources, each row with its counts,
// and every resource and webhook that keep accepts listed.
func webhookTables(t *testing.T, c *auditcount.Counter, out string, resources bool, keep func(auditcount.WebhookRequest) bool) {
	t.Helper()
	tables := strings.Split(strings.TrimRight(out, "\n"), "\n\n")
	type key = webhookKey
	want := map[key]auditcount.WebhookCounts{}
	for _, w := range c.Webhooks {
		if !keep(w) || (w.Webhook == "" && !resources) {
			continue
		}
		sum := want[key{w.Resource, w.Webhook}]
		sum.Add(w.WebhookCounts)
		want[key{w.Resource, w.Webhook}] = sum
	}
	got := map[key]auditcount.WebhookCounts{}
	for _, tb := range tables {
		for _, row := range table(t, tb, nil) {
			latency, err := time.ParseDuration(row["WEBHOOK LATENCY"])
			require.NoError(t, err)
			got[key{row["RESOURCE"], row["WEBHOOK"]}] = auditcount.WebhookCounts{Requests: number(t, row["REQUESTS"]), Calls: number(t, row["CALLS"]),
				Mutations: number(t, row["MUTATED"]), FailedOpen: number(t, row["FAILED OPEN"]), Slow: number(t, row["SLOW"]), Latency: latency}
		}
	}
	require.Equal(t, slices.SortedFunc(maps.Keys(want), cmpKey), slices.SortedFunc(maps.Keys(got), cmpKey))
	for k, w := range want {
		g := got[k]
		// Printed to the millisecond.
		require.InDelta(t, w.Latency.Seconds(), g.Latency.Seconds(), 0.001, "%v", k)
		g.Latency = w.Latency
		require.Equal(t, w, g, "%v", k)
	}
}

// webhookKey is a row of `sunset report webhooks`: a resource's (webhook
// empty) or a webhook's on a resource.
type webhookKey struct{ resource, webhook string }

func cmpKey(a, b webhookKey) int {
	return strings.Compare(a.resource+"\x00"+a.webhook, b.resource+"\x00"+b.webhook)
}

// replayTable checks a replay dry run's table: a row per API, hour, node,
// client and verb, with the requests that would count.
func replayTable(t *testing.T, c *auditcount.Counter, out string) {
	t.Helper()
	var sum int64
	for _, row := range table(t, out, nil) {
		n := number(t, row["WOULD COUNT"])
		agent := row["USER AGENT"]
		if agent == "-" {
			agent = ""
		}
		require.Equal(t, c.Count(func(r request) bool {
			return r.API == row["API"] && r.Hour.Format(time.RFC3339) == row["HOUR"] && r.Node == row["NODE"] && r.Username == row["USER"] &&
				r.UserAgent == agent && r.Verb == row["VERB"]
		}), n, row)
		sum += n
	}
	require.Equal(t, c.Count(nil), sum, "every request is in a row")
}

// goldenNumbers checks the numbers of each golden file, given its
// content, against the count of what its test fed Sunset.
var goldenNumbers = map[string]func(t *testing.T, out string){
	"report-table.golden": func(t *testing.T, out string) {
		reportTable(t, fixtureCount(t), out, auditcount.NotSystem, 24*time.Hour, nil)
	},
	"report-wide.golden": func(t *testing.T, out string) {
		reportTable(t, fixtureCount(t), out, auditcount.NotSystem, 24*time.Hour, nil)
	},
	"report-with-system.golden": func(t *testing.T, out string) {
		reportTableOf(t, fixtureCount(t), out, all, false, 24*time.Hour, nil)
	},
	"report-no-headers.golden": func(t *testing.T, out string) {
		reportTable(t, fixtureCount(t), out, auditcount.NotSystem, 24*time.Hour,
			[]string{"NAME", "REMOVED IN", "NON-SYSTEM REQUESTS (CURRENT HOUR)", "NON-SYSTEM REQUESTS (24H)", "TOP USER", "TOP USER AGENT"})
	},
	"report-removed-before.golden": func(t *testing.T, out string) {
		c := fixtureCount(t)
		reportTable(t, c, out, auditcount.And(auditcount.NotSystem, func(r request) bool {
			rel, _ := removedIn(c, r.API)
			return rel != "" && auditcount.ReleaseLess(rel, "1.38")
		}), 48*time.Hour, nil)
	},
	"report-user.golden": func(t *testing.T, out string) {
		c := fixtureCount(t)
		bob := apis(c, auditcount.And(day, func(r request) bool { return r.Username == "bob" }))
		reportTable(t, c, out, auditcount.And(auditcount.NotSystem, func(r request) bool { return slices.Contains(bob, r.API) }), 24*time.Hour, nil)
	},
	"report-json.golden": func(t *testing.T, out string) { object(t, fixtureCount(t), out, nil) },
	"report-yaml.golden": func(t *testing.T, out string) { object(t, fixtureCount(t), out, nil) },
	"report-describe-yaml.golden": func(t *testing.T, out string) {
		object(t, fixtureCount(t), out, clusterIs("default"))
	},
	"report-describe.golden": func(t *testing.T, out string) {
		describe(t, fixtureCount(t), out, "widgets.v1beta1.e2e.example.com", auditcount.NotSystem)
	},
	"report-describe-cron.golden": func(t *testing.T, out string) {
		describe(t, fixtureCount(t), out, "cronjobs.v1beta1.batch", all)
	},
	"report-name.golden": func(t *testing.T, out string) {
		var want []string
		for _, name := range apis(fixtureCount(t), auditcount.And(auditcount.NotSystem, day)) {
			want = append(want, "apirequestcount.sunset.dev/"+name)
		}
		require.Equal(t, want, strings.Fields(out))
	},
	"report-describe-name.golden": func(t *testing.T, out string) {
		require.Positive(t, fixtureCount(t).Count(auditcount.And(apiIs("endpoints.v1"), day)))
		require.Equal(t, "apirequestcount.sunset.dev/endpoints.v1\n", out)
	},
	"report-jsonpath.golden": func(t *testing.T, out string) {
		c := fixtureCount(t)
		var want strings.Builder
		for _, name := range apis(c, day) {
			if rel, _ := removedIn(c, name); rel != "" {
				want.WriteString(rel + "\t" + name + "\n")
			}
		}
		require.Equal(t, want.String(), out)
	},
	"report-custom-columns.golden": func(t *testing.T, out string) {
		c := fixtureCount(t)
		var names []string
		for _, row := range table(t, out, nil) {
			names = append(names, row["NAME"])
			require.Equal(t, c.Count(auditcount.And(apiIs(row["NAME"]), day)), number(t, row["REQUESTS"]), row)
			_, removed := removedIn(c, row["NAME"])
			require.Equal(t, map[bool]string{true: "removed", false: "deprecated"}[removed], row["STATE"], row)
		}
		require.Equal(t, apis(c, day), names)
	},
	"check-removed.golden": func(t *testing.T, out string) {
		checkText(t, fixtureCount(t), out, auditcount.NotSystem, "1.24")
	},
	"check-safe.golden": func(t *testing.T, out string) {
		checkText(t, fixtureCount(t), out, auditcount.And(auditcount.NotSystem, clusterIs("default")), "1.36")
	},
	"check-warnings.golden": func(t *testing.T, out string) {
		checkText(t, fixtureCount(t), out, auditcount.And(auditcount.NotSystem, clusterIs("default")), "1.36")
	},
	"check-target.golden": func(t *testing.T, out string) {
		checkText(t, fixtureCount(t), out, auditcount.And(auditcount.NotSystem, clusterIs("default")), "1.37")
	},
	"check-with-system.golden": func(t *testing.T, out string) {
		checkText(t, fixtureCount(t), out, clusterIs("default"), "1.36")
	},
	"check-json.golden": func(t *testing.T, out string) {
		checkJSON(t, fixtureCount(t), out, auditcount.NotSystem, "1.37", 48*time.Hour)
	},
	"report-webhooks.txt": func(t *testing.T, out string) {
		webhookTables(t, webhookCount(t), out, true, func(auditcount.WebhookRequest) bool { return true })
	},
	"report-webhooks-security-wide.txt": func(t *testing.T, out string) {
		webhookTables(t, webhookCount(t), out, true, func(w auditcount.WebhookRequest) bool {
			return slices.Contains(securityResources, strings.Split(w.Resource, ".")[0])
		})
	},
	"report-webhooks-istio.txt": func(t *testing.T, out string) {
		webhookTables(t, webhookCount(t), out, false, func(w auditcount.WebhookRequest) bool {
			return w.Webhook == "istio-sidecar-injector.sidecar-injector.istio.io"
		})
	},
	"replay-dry-run.golden": func(t *testing.T, out string) {
		c := auditcount.New(auditcount.Options{Lifecycle: auditcount.BuiltinLifecycle(t)})
		c.AddFile(t, "lab", "master-9", capturedLog)
		replayTable(t, c, out)
	},
	"replay-falco-1.15.golden": func(t *testing.T, out string) {
		c := auditcount.New(auditcount.Options{Lifecycle: auditcount.BuiltinLifecycle(t), ClusterVersions: map[string]string{"minikube": "1.15"}})
		c.AddFile(t, "minikube", "minikube", "../../testdata/public/falco-k8s_audit-trace_files.jsonl")
		replayTable(t, c, out)
	},
}

// requireGoldenNumbers checks the numbers of testdata/file, which holds
// out, against the independent count.
func requireGoldenNumbers(t *testing.T, file, out string) {
	t.Helper()
	check, ok := goldenNumbers[file]
	require.True(t, ok, "no check of the numbers of %s in goldenNumbers", file)
	check(t, out)
}

// Every golden file has its numbers checked.
func TestEveryGoldenHasItsNumbersChecked(t *testing.T) {
	files, err := filepath.Glob("testdata/*")
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && !fi.IsDir() {
			names = append(names, filepath.Base(f))
		}
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(goldenNumbers)), names)
	// And each check holds for the file as it is.
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		t.Run(name, func(t *testing.T) { goldenNumbers[name](t, string(b)) })
	}
}
