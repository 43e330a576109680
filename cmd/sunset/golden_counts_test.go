package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
