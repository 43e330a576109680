package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A node and hour with more users than the API returns (sunset report asks
// for the top 100): the node's total still counts every user, because it
// comes from the node's own count, not from the listed users.
func TestReportNodeTotalsIncludeUnlistedUsers(t *testing.T) {
	url, _, _ := startServer(t, testNow, t.TempDir())

	event := func(id, user string) string {
		return fmt.Sprintf(`{"auditID":%q,"stage":"ResponseComplete","verb":"get","user":{"username":%q},"userAgent":"client/1.0",`+
			`"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-21T19:10:00Z","annotations":{"k8s.io/deprecated":"true"}}`, id, user)
	}
	post := func(path string, items []string) {
		body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items, ",") + `]}`
		resp, err := http.Post(url+path, "application/json", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	// master-a: 150 users with one request each, and system:apiserver
	// with 3, all in one hour: 151 clients. master-b: alice with 2.
	var items []string
	for i := range 150 {
		items = append(items, event(fmt.Sprintf("a-%d", i), fmt.Sprintf("user-%03d", i)))
	}
	for i := range 3 {
		items = append(items, event(fmt.Sprintf("sys-%d", i), "system:apiserver"))
	}
	post("/audit/webhook/master-a", items)
	post("/audit/webhook/master-b", []string{event("b-0", "alice"), event("b-1", "alice")})

	section := func(out, title string) string {
		_, rest, ok := strings.Cut(out, title+"\n")
		require.True(t, ok, out)
		s, _, _ := strings.Cut(rest, "\n\n")
		return s
	}
	lastLine := func(s string) string { return s[strings.LastIndex(s, "\n")+1:] }

	// System users left out (the default): 150 on master-a. The API lists
	// system:apiserver (3) and the first 99 users; 51 are not listed.
	out, stderr, code := runCLI("report", "endpoints.v1", "--server", url)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, ""+
		"  NODE       CLUSTER   REQUESTS\n"+
		"  master-a   default   150\n"+
		"  master-b   default   2", section(out, "By node (last 24h):"))
	users := strings.TrimRight(section(out, "By user (last 24h):"), "\n")
	require.Equal(t, 1+100+1, strings.Count(users, "\n")+1, "header, alice and 99 users of master-a, the unlisted")
	unlisted := []string{"(users", "beyond", "the", "top", "100", "of", "a", "node", "and", "hour)", "-", "-", "51", "-"}
	require.Equal(t, unlisted, strings.Fields(lastLine(users)))
	require.Contains(t, out, "Requests:       152 in the last 24h (3 more from system users, not shown), 152 in the current hour\n")

	// Everyone: 153 on master-a, of which the 100 listed have 3 + 99.
	out, stderr, code = runCLI("report", "endpoints.v1", "--server", url, "--exclude-system=false")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, ""+
		"  NODE       CLUSTER   REQUESTS\n"+
		"  master-a   default   153\n"+
		"  master-b   default   2", section(out, "By node (last 24h):"))
	require.Equal(t, unlisted, strings.Fields(lastLine(strings.TrimRight(section(out, "By user (last 24h):"), "\n"))))
}
