package replay_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/cli/connect"
	"github.com/kube-sunset/sunset/cli/replay"
	"github.com/kube-sunset/sunset/client"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
	"github.com/kube-sunset/sunset/parts"
)

// events is how many events the log holds; gen makes every third one a
// list of the deprecated core/v1 Endpoints, by two service accounts.
const events = 30

// deprecated is how many of the log's events count: 0, 3, ... 27.
const deprecated = 10

// testLog writes a log of events generated in the hour before now's, ten
// minutes into it so that all fall in that hour, and returns its path and
// the options that generated it.
func testLog(t *testing.T, now time.Time) (string, auditgen.Options) {
	t.Helper()
	gen := auditgen.Options{Prefix: "r", DeprecatedEvery: 3, Users: 2, At: now.Truncate(time.Hour).Add(-50 * time.Minute)}
	require.Equal(t, deprecated, gen.CountDeprecated(0, events))
	var b []byte
	for i := range events {
		b = append(gen.Append(b, i), '\n')
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path, gen
}

// elapsed hides the one part of a summary that varies.
var elapsed = regexp.MustCompile(` in [0-9.]+[µnm]?s:`)

// run replays o's inputs and returns what it wrote to Stdout and Stderr,
// the elapsed time of the summary hidden.
func run(t *testing.T, o replay.Options) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o.Stdout, o.Stderr = &out, &errOut
	if o.DryRun == "" {
		o.DryRun = replay.DryRunNone
	}
	if o.Cluster == "" {
		o.Cluster, o.Node = "default", "replay"
	}
	err = replay.Run(context.Background(), o)
	return out.String(), elapsed.ReplaceAllString(errOut.String(), " in T:"), err
}

// countIn reads how many requests to endpoints.v1 cluster has in the data
// directory dir, over the day before now.
func countIn(t *testing.T, dir, cluster string, now time.Time) int64 {
	t.Helper()
	parts, err := parts.Open(config.Default(), parts.Options{DataDir: dir, ReadOnly: true, Logger: zerolog.Nop(),
		Now: func() time.Time { return now }})
	require.NoError(t, err)
	defer func() { require.NoError(t, parts.Close()) }()
	obj, err := parts.Service().Get("endpoints.v1", sunsetv1.Query{Cluster: cluster, Since: 24 * time.Hour})
	require.NoError(t, err)
	return obj.Status.Window.RequestCount
}

// A replay into a data directory counts the deprecated requests, says so
// on Stderr and nothing on Stdout; the same file again counts nothing new:
// every request is a duplicate.
func TestReplayIntoADataDirectory(t *testing.T) {
	now := time.Now().UTC()
	log, _ := testLog(t, now)
	dir := t.TempDir()
	o := replay.Options{Inputs: []string{log}, Source: connect.Flags{DataDir: dir}, Now: func() time.Time { return now }}

	out, errOut, err := run(t, o)
	require.NoError(t, err)
	require.Empty(t, out)
	require.Equal(t, "Replayed 30 events from 1 input in T: 10 counted, 0 duplicates, 20 skipped (20 not_deprecated), 0 invalid lines.\n", errOut)
	require.Equal(t, int64(deprecated), countIn(t, dir, "default", now))

	out, errOut, err = run(t, o)
	require.NoError(t, err)
	require.Empty(t, out)
	require.Equal(t, "Replayed 30 events from 1 input in T: 0 counted, 10 duplicates, 20 skipped (20 not_deprecated), 0 invalid lines.\n", errOut)
	require.Equal(t, int64(deprecated), countIn(t, dir, "default", now))
}

// A client-side dry run prints what would be counted, one row per API,
// hour, node, user, user agent and verb, and stores nothing: a real
// replay afterwards counts everything.
func TestReplayDryRunClient(t *testing.T) {
	now := time.Now().UTC()
	log, gen := testLog(t, now)
	dir := t.TempDir()
	hour := gen.At.Truncate(time.Hour).Format(time.RFC3339)

	out, errOut, err := run(t, replay.Options{Inputs: []string{log}, Source: connect.Flags{DataDir: dir}, DryRun: replay.DryRunClient,
		Cluster: "lab", Node: "master-1", Now: func() time.Time { return now }})
	require.NoError(t, err)
	require.Equal(t, "Dry run (client): read 30 events from 1 input in T: 10 would be counted, 0 duplicates, 20 skipped (20 not_deprecated), 0 invalid lines.\n", errOut)
	// Events 0, 6, ... 24 are sa-0's, 3, 9, ... 27 sa-1's.
	require.Equal(t,
		"API            HOUR                   NODE       USER                                USER AGENT           VERB   WOULD COUNT\n"+
			"endpoints.v1   "+hour+"   master-1   system:serviceaccount:team-0:sa-0   controller/v1.32.4   list   5\n"+
			"endpoints.v1   "+hour+"   master-1   system:serviceaccount:team-1:sa-1   controller/v1.32.4   list   5\n", out)

	_, errOut, err = run(t, replay.Options{Inputs: []string{log}, Source: connect.Flags{DataDir: dir}, Cluster: "lab", Node: "master-1",
		Now: func() time.Time { return now }})
	require.NoError(t, err)
	require.Equal(t, "Replayed 30 events from 1 input in T: 10 counted, 0 duplicates, 20 skipped (20 not_deprecated), 0 invalid lines.\n", errOut,
		"the dry run stored nothing")
}

// Options that cannot be meant are refused before anything is read or
// written, with no summary.
func TestReplayRefusesOptions(t *testing.T) {
	now := time.Now().UTC()
	log, _ := testLog(t, now)
	dir := t.TempDir()
	for _, tc := range []struct {
		o   replay.Options
		err string
	}{
		{replay.Options{DryRun: "maybe", Source: connect.Flags{DataDir: dir}}, `--dry-run "maybe" is not one of none, client, server`},
		{replay.Options{DryRun: "Client", Source: connect.Flags{DataDir: dir}}, `--dry-run "Client" is not one of none, client, server`},
		{replay.Options{DryRun: replay.DryRunServer, Source: connect.Flags{DataDir: dir}}, "--dry-run=server needs --server"},
		{replay.Options{DryRun: replay.DryRunNone, Source: connect.Flags{Server: "http://127.0.0.1:1", DataDir: dir}}, "give either --server or --data-dir, not both"},
		{replay.Options{DryRun: replay.DryRunClient, Source: connect.Flags{Server: "http://127.0.0.1:1", DataDir: dir}}, "give either --server or --data-dir, not both"},
		// The --dry-run value is checked first; the CLI's default is
		// none, Options' zero value none of them.
		{replay.Options{Source: connect.Flags{DataDir: dir}}, `--dry-run "" is not one of none, client, server`},
		{replay.Options{DryRun: "all", Source: connect.Flags{Server: "http://127.0.0.1:1", DataDir: dir}}, `--dry-run "all" is not one of none, client, server`},
	} {
		var out, errOut bytes.Buffer
		tc.o.Inputs, tc.o.Stdout, tc.o.Stderr, tc.o.Now = []string{log}, &out, &errOut, func() time.Time { return now }
		err := replay.Run(context.Background(), tc.o)
		require.EqualError(t, err, tc.err)
		require.Empty(t, out.String())
		require.Empty(t, errOut.String())
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing opened the data directory")
}

// An input that does not exist is an error before the data directory is
// opened.
func TestReplayMissingInput(t *testing.T) {
	now := time.Now().UTC()
	log, _ := testLog(t, now)
	dir := t.TempDir()
	missing := filepath.Join(t.TempDir(), "nope.log")
	out, errOut, err := run(t, replay.Options{Inputs: []string{log, missing}, Source: connect.Flags{DataDir: dir}, Now: func() time.Time { return now }})
	require.EqualError(t, err, "stat "+missing+": no such file or directory")
	require.Empty(t, out)
	require.Empty(t, errOut)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// Through --server, a server-side dry run finds what the server would
// count and stores nothing; the replay then counts through the server's
// webhook, under --cluster and --node, and the server answers with the
// count; a second replay, and a dry run after it, find only duplicates.
func TestReplayThroughAServer(t *testing.T) {
	now := time.Now().UTC()
	log, gen := testLog(t, now)
	srv := testserver.Start(t, testserver.Config(t), app.Options{Now: func() time.Time { return now }, Logger: testserver.Logger(t)})
	c, err := client.New(client.Options{Server: srv.URL})
	require.NoError(t, err)
	o := replay.Options{Inputs: []string{log}, Source: connect.Flags{Server: srv.URL}, Cluster: "lab", Node: "master-1", Now: func() time.Time { return now }}

	dry := o
	dry.DryRun = replay.DryRunServer
	out, errOut, err := run(t, dry)
	require.NoError(t, err)
	require.Equal(t, "Dry run (server): read 30 events from 1 input in T: 10 would be counted, 0 duplicates, 20 skipped (20 not_deprecated), 0 invalid lines.\n", errOut)
	hour := gen.At.Truncate(time.Hour).Format(time.RFC3339)
	require.Equal(t,
		"API            HOUR                   NODE       USER                                USER AGENT           VERB   WOULD COUNT\n"+
			"endpoints.v1   "+hour+"   master-1   system:serviceaccount:team-0:sa-0   controller/v1.32.4   list   5\n"+
			"endpoints.v1   "+hour+"   master-1   system:serviceaccount:team-1:sa-1   controller/v1.32.4   list   5\n", out)
	_, err = c.Get("endpoints.v1", sunsetv1.Query{Cluster: "lab", Since: 24 * time.Hour})
	require.ErrorIs(t, err, sunsetv1.ErrNotFound, "the dry run stored nothing")

	out, errOut, err = run(t, o)
	require.NoError(t, err)
	require.Empty(t, out)
	require.Equal(t, "Replayed 30 events from 1 input in T: 10 counted, 0 duplicates, 20 skipped (20 not_deprecated), 0 invalid lines.\n", errOut)
	obj, err := c.Get("endpoints.v1", sunsetv1.Query{Cluster: "lab", Since: 24 * time.Hour, Users: 100})
	require.NoError(t, err)
	require.Equal(t, int64(deprecated), obj.Status.Window.RequestCount)
	users := map[string]int64{}
	for _, u := range obj.Status.Window.ByUser {
		users[u.UserName] = u.RequestCount
	}
	require.Equal(t, map[string]int64{"system:serviceaccount:team-0:sa-0": 5, "system:serviceaccount:team-1:sa-1": 5}, users)

	_, errOut, err = run(t, o)
	require.NoError(t, err)
	require.Equal(t, "Replayed 30 events from 1 input in T: 0 counted, 10 duplicates, 20 skipped (20 not_deprecated), 0 invalid lines.\n", errOut)

	// Now the server has them all: a dry run finds duplicates, and its
	// table, of what would be counted, is empty.
	out, errOut, err = run(t, dry)
	require.NoError(t, err)
	require.Equal(t, "Dry run (server): read 30 events from 1 input in T: 0 would be counted, 10 duplicates, 20 skipped (20 not_deprecated), 0 invalid lines.\n", errOut)
	require.Equal(t, "API   HOUR   NODE   USER   USER AGENT   VERB   WOULD COUNT\n", out)
}

// A server that is not there: the error is the client's, naming the
// webhook path of --cluster and --node, and the summary still says what
// was read, with nothing counted.
func TestReplayServerUnreachable(t *testing.T) {
	now := time.Now().UTC()
	log, _ := testLog(t, now)
	_, errOut, err := run(t, replay.Options{Inputs: []string{log}, Source: connect.Flags{Server: "http://127.0.0.1:1"}, Now: func() time.Time { return now }})
	require.EqualError(t, err, "cannot reach Sunset at http://127.0.0.1:1 (is `sunset serve` running there? or read a data directory with --data-dir): "+
		`Post "http://127.0.0.1:1/audit/webhook/default/replay": dial tcp 127.0.0.1:1: connect: connection refused`)
	require.Equal(t, "Replay stopped by the error below after 30 events from 1 input in T: 0 counted, 0 duplicates, 0 skipped, 0 invalid lines.\n", errOut)
}

// A data directory a running server holds is refused, and the error says
// to replay through the server instead.
func TestReplayIntoADataDirectoryAServerHolds(t *testing.T) {
	now := time.Now().UTC()
	log, _ := testLog(t, now)
	srv := testserver.Start(t, testserver.Config(t), app.Options{Now: func() time.Time { return now }, Logger: testserver.Logger(t)})
	out, errOut, err := run(t, replay.Options{Inputs: []string{log}, Source: connect.Flags{DataDir: srv.Config.DataDir}, Now: func() time.Time { return now }})
	dir := srv.Config.DataDir
	require.EqualError(t, err, "store: "+dir+" is in use by another Sunset process (badger holds its lock): "+
		`Cannot acquire directory lock on "`+dir+`": resource temporarily unavailable`+"\n"+
		"A running server holds the data directory: replay through it with --server and the address it listens on (serve's --listen, http://localhost:8080 when not set)")
	require.Empty(t, out)
	require.Empty(t, errOut)
}
