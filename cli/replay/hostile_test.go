package replay_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/cli/connect"
	"github.com/kube-sunset/sunset/cli/replay"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// hostileAgent clears the screen, sets the terminal's title (OSC ... BEL),
// returns the cursor to the start of the line and reverses what follows
// (U+202E): raw, it would rewrite what the admin sees. It has no space,
// so that user-agent short keeps it whole.
const hostileAgent = "evil/1.0\x1b[2J\x1b]0;pwned\x07\rSAFE\u202etxt.exe"

// escapedAgent is hostileAgent as every table prints it.
const escapedAgent = `evil/1.0^[[2J^[]0;pwned\x07\rSAFE\u202etxt.exe`

// hostileLog writes one deprecated request of the hour before now's,
// from a user and a user agent with control characters in them.
func hostileLog(t *testing.T, now time.Time) (path, hour string) {
	t.Helper()
	at := now.Truncate(time.Hour).Add(-50 * time.Minute)
	line := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"hostile-1","stage":"ResponseComplete",` +
		`"requestURI":"/api/v1/endpoints","verb":"list","user":{"username":"eve\u001b[1m\u202eadmin"},"userAgent":` +
		strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(`"`+hostileAgent+`"`, "\x1b", `\u001b`), "\x07", `\u0007`), "\r", `\r`), "\u202e", `\u202e`) +
		`,"objectRef":{"resource":"endpoints","apiVersion":"v1"},"responseStatus":{"code":200},` +
		`"requestReceivedTimestamp":"` + at.Format(time.RFC3339Nano) + `","stageTimestamp":"` + at.Format(time.RFC3339Nano) + `",` +
		`"annotations":{"k8s.io/deprecated":"true"}}` + "\n"
	path = filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, []byte(line), 0o600))
	return path, at.Truncate(time.Hour).Format(time.RFC3339)
}

// A dry run's table, local or on the server, escapes the user name and
// user agent as every other table does: no escape, BEL, carriage return
// or bidirectional override reaches the terminal, and the row stays one
// row of seven cells.
func TestReplayDryRunEscapesAuditStrings(t *testing.T) {
	now := time.Now().UTC()
	log, hour := hostileLog(t, now)
	want := "API            HOUR                   NODE       USER                  USER AGENT                                       VERB   WOULD COUNT\n" +
		"endpoints.v1   " + hour + `   master\t   eve^[[1m\u202eadmin   ` + escapedAgent + "   list   1\n"

	out, errOut, err := run(t, replay.Options{Inputs: []string{log}, Source: connect.Flags{DataDir: t.TempDir()}, DryRun: replay.DryRunClient,
		Cluster: "lab", Node: "master\x09", Now: func() time.Time { return now }})
	require.NoError(t, err)
	require.Equal(t, "Dry run (client): read 1 events from 1 input in T: 1 would be counted, 0 duplicates, 0 skipped, 0 invalid lines.\n", errOut)
	require.Equal(t, want, out)

	srv := testserver.Start(t, testserver.Config(t), app.Options{Now: func() time.Time { return now }, Logger: testserver.Logger(t)})
	out, _, err = run(t, replay.Options{Inputs: []string{log}, Source: connect.Flags{Server: srv.URL}, DryRun: replay.DryRunServer,
		Cluster: "lab", Node: "master\x09", Now: func() time.Time { return now }})
	require.NoError(t, err)
	require.Equal(t, want, out)
}

// The first invalid lines are quoted by file name and decoder message,
// both escaped: a file name is whatever the directory holds.
func TestReplaySummaryEscapesFileNames(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "a\x1b[2J.log")
	require.NoError(t, os.WriteFile(name, []byte("not json\n"), 0o600))
	now := time.Now().UTC()
	_, errOut, err := run(t, replay.Options{Inputs: []string{name}, Source: connect.Flags{DataDir: t.TempDir()}, DryRun: replay.DryRunClient,
		Now: func() time.Time { return now }})
	require.NoError(t, err)
	require.NotContains(t, errOut, "\x1b")
	require.Contains(t, errOut, "\n  "+dir+"/a^[[2J.log:1: ")
}
