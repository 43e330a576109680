package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
)

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
