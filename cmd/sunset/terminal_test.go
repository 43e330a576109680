package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostileAgent clears the screen, and with a tab and a newline would make
// a row of its own that says a removed API is no longer called.
// Its cells are tab-separated, like the table's own.
const hostileAgent = "evil/1.0\x1b[2J\tforged\ncronjobs.v1beta1.batch\t1.25\t0\t0\tnobody\tnothing"

// A user agent and a username with an escape sequence, a tab and a
// newline, sent to a real server through its webhook, come out of
// `sunset report` and `sunset check` escaped, in their own cells of their
// own rows; JSON keeps them exact.
func TestReportEscapesHostileStrings(t *testing.T) {
	url, _, stop := startServer(t, testNow, t.TempDir())
	defer stop()
	body, err := json.Marshal(map[string]any{"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": []any{map[string]any{
		"auditID": "hostile-1", "stage": "ResponseComplete", "verb": "get",
		"user": map[string]any{"username": "eve\tadmin"}, "userAgent": hostileAgent,
		"objectRef":                map[string]any{"resource": "volumeattributesclasses", "apiGroup": "storage.k8s.io", "apiVersion": "v1beta1"},
		"responseStatus":           map[string]any{"code": 200},
		"requestReceivedTimestamp": "2026-11-21T19:05:00Z",
		"annotations":              map[string]any{"k8s.io/deprecated": "true", "k8s.io/removed-release": "1.37"},
	}}})
	require.NoError(t, err)
	resp, err := http.Post(url+"/audit/webhook/master-0", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)

	const escapedAgent = `evil/1.0^[[2J\tforged\ncronjobs.v1beta1.batch\t1.25\t0\t0\tnobody\tnothing`
	out, errOut, code := runCLI("report", "--server", url)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "NAME                                             REMOVED IN   REQUESTS (CURRENT HOUR)   REQUESTS (24H)   TOP USER     TOP USER AGENT\n"+
		`volumeattributesclasses.v1beta1.storage.k8s.io   1.37         1                         1                eve\tadmin   `+escapedAgent+"\n", out)

	out, errOut, code = runCLI("report", "-o", "wide", "--server", url)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 2, strings.Count(out, "\n"), out)
	require.Contains(t, out, `eve\tadmin   `+escapedAgent+"   ")

	out, errOut, code = runCLI("report", "volumeattributesclasses.v1beta1.storage.k8s.io", "--server", url)
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "\x1b")
	require.Contains(t, out, "\n  eve\\tadmin   "+escapedAgent+"   -          1          get=1\n")

	out, _, code = runCLI("check", "--target-version", "1.37", "--server", url)
	require.Equal(t, 3, code)
	require.Contains(t, out, "by 1 client: eve\\tadmin)\n")
	require.NotContains(t, out, "\t")

	// JSON is for programs: it holds the strings exactly as they were sent.
	out, errOut, code = runCLI("report", "-o", "json", "--server", url)
	require.Equal(t, 0, code, errOut)
	var list struct {
		Items []struct {
			Status struct {
				CurrentHour struct {
					ByNode []struct {
						ByUser []struct {
							UserName  string `json:"username"`
							UserAgent string `json:"userAgent"`
						} `json:"byUser"`
					} `json:"byNode"`
				} `json:"currentHour"`
			} `json:"status"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	user := list.Items[0].Status.CurrentHour.ByNode[0].ByUser[0]
	require.Equal(t, "eve\tadmin", user.UserName)
	require.Equal(t, hostileAgent, user.UserAgent)
}
