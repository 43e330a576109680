package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
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
	require.Equal(t, "NAME                                             REMOVED IN   NON-SYSTEM REQUESTS (CURRENT HOUR)   NON-SYSTEM REQUESTS (24H)   TOP USER     TOP USER AGENT\n"+
		`volumeattributesclasses.v1beta1.storage.k8s.io   1.37         1                                    1                           eve\tadmin   `+escapedAgent+"\n", out)

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

// controlAgent clears the screen, sets the terminal's title (OSC ... BEL),
// returns to the start of the line and reverses what follows (U+202E).
// It has no space, so that user-agent short keeps it whole.
const controlAgent = "evil/1.0\x1b[2J\x1b]0;pwned\x07\rSAFE\u202etxt.exe"

// escapedControlAgent is controlAgent as every table prints it.
const escapedControlAgent = `evil/1.0^[[2J^[]0;pwned\x07\rSAFE\u202etxt.exe`

// rawControls are what no text output may hold.
var rawControls = []string{"\x1b", "\x07", "\r", "\u202e"}

// A user agent with ESC, BEL, a carriage return and a bidirectional
// override, replayed from a log file into a server, comes out escaped, the
// same way, from every table and text output: the replay's dry runs
// (client and server), report, wide, describe, custom-columns and check.
func TestEveryTableEscapesControlCharacters(t *testing.T) {
	line, err := json.Marshal(map[string]any{"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
		"auditID": "control-1", "stage": "ResponseComplete", "verb": "get", "requestURI": "/apis/storage.k8s.io/v1beta1/volumeattributesclasses/x",
		"user": map[string]any{"username": "eve\u202eadmin"}, "userAgent": controlAgent,
		"objectRef":                map[string]any{"resource": "volumeattributesclasses", "apiGroup": "storage.k8s.io", "apiVersion": "v1beta1"},
		"responseStatus":           map[string]any{"code": 200},
		"requestReceivedTimestamp": "2026-11-21T19:05:00Z", "stageTimestamp": "2026-11-21T19:05:00Z",
		"annotations": map[string]any{"k8s.io/deprecated": "true", "k8s.io/removed-release": "1.37"},
	})
	require.NoError(t, err)
	log := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(log, append(line, '\n'), 0o600))
	url, _, stop := startServer(t, testNow, t.TempDir())
	defer stop()
	const api = "volumeattributesclasses.v1beta1.storage.k8s.io"

	noControls := func(name, out string) {
		t.Helper()
		for _, c := range rawControls {
			require.NotContains(t, out, c, "%s: %q", name, out)
		}
	}
	dryRun := "API                                              HOUR                   NODE       USER             USER AGENT                                       VERB   WOULD COUNT\n" +
		api + `   2026-11-21T19:00:00Z   master-0   eve\u202eadmin   ` + escapedControlAgent + "   get    1\n"
	out, errOut, code := runCLI("replay", "--dry-run=client", "--data-dir", t.TempDir(), "--node", "master-0", log)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, dryRun, out)
	out, errOut, code = runCLI("replay", "--dry-run=server", "--server", url, "--node", "master-0", log)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, dryRun, out)
	_, errOut, code = runCLI("replay", "--server", url, "--node", "master-0", log)
	require.Equal(t, 0, code, errOut)

	out, errOut, code = runCLI("report", "--server", url)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "NAME                                             REMOVED IN   NON-SYSTEM REQUESTS (CURRENT HOUR)   NON-SYSTEM REQUESTS (24H)   TOP USER         TOP USER AGENT\n"+
		api+`   1.37         1                                    1                           eve\u202eadmin   `+escapedControlAgent+"\n", out)

	for name, args := range map[string][]string{
		"wide":           {"report", "-o", "wide"},
		"describe":       {"report", api},
		"custom-columns": {"report", "-o", "custom-columns=AGENT:.status.currentHour.byNode[*].byUser[*].userAgent"},
	} {
		out, errOut, code = runCLI(append(args, "--server", url)...)
		require.Equal(t, 0, code, "%s: %s", name, errOut)
		noControls(name, out+errOut)
		require.Contains(t, out, escapedControlAgent, name)
	}

	out, errOut, code = runCLI("check", "--target-version", "1.37", "--server", url)
	require.Equal(t, 3, code, errOut)
	noControls("check", out+errOut)
	require.Contains(t, out, `by 1 client: eve\u202eadmin)`+"\n")
}

// An error that quotes a file name is escaped too, line by line.
func TestErrorsEscapeControlCharacters(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone\x1b[2J\u202e.log")
	_, errOut, code := runCLI("replay", "--dry-run=client", "--data-dir", t.TempDir(), missing)
	require.Equal(t, 1, code)
	noControls := strings.ContainsAny(errOut, "\x1b\u202e")
	require.False(t, noControls, "%q", errOut)
	require.Contains(t, errOut, `gone^[[2J\u202e.log`)
	require.True(t, strings.HasPrefix(errOut, "Error: "), errOut)
}
