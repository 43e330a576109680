package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// When the window holds nothing to show but the store holds counts, report
// and check say what and how to see it, through a server and from a data
// directory alike.
func TestEmptyWindowHints(t *testing.T) {
	// Two days after the capture: all of it is older than 24h.
	captured := t.TempDir()
	_, errOut, code := runCLI("replay", capturedLog, "--node", "master-0", "--data-dir", captured)
	require.Equal(t, 0, code, errOut)

	// Only system traffic now; alice three days ago; system 40 days ago
	// is beyond the retention.
	line := func(id, user, at string) string {
		return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `","stage":"ResponseComplete","verb":"get","user":{"username":"` + user +
			`"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"` + at + `","annotations":{"k8s.io/deprecated":"true"}}` + "\n"
	}
	mixed := filepath.Join(t.TempDir(), "mixed.log")
	require.NoError(t, os.WriteFile(mixed, []byte(
		line("s1", "system:apiserver", "2026-11-23T12:10:00Z")+line("s2", "system:apiserver", "2026-11-23T13:01:00Z")+
			line("a1", "alice", "2026-11-20T08:00:00Z")), 0o600))
	systemOnly := filepath.Join(t.TempDir(), "system.log")
	require.NoError(t, os.WriteFile(systemOnly, []byte(line("s3", "system:apiserver", "2026-11-19T08:00:00Z")), 0o600))
	dirs := map[string]string{"captured": captured}
	for name, file := range map[string]string{"mixed": mixed, "system": systemOnly} {
		dirs[name] = t.TempDir()
		_, errOut, code := runCLIWith(shiftNow, "", "replay", file, "--node", "n", "--data-dir", dirs[name])
		require.Equal(t, 0, code, errOut)
	}

	cases := []struct {
		dir    string
		args   []string
		stdout string
		stderr string
	}{
		{"captured", []string{"report"}, "",
			"No deprecated API requests in the last 24h (39 older ones within the 720h retention; try --since 720h).\n"},
		{"captured", []string{"report", "--exclude-system=false", "-o", "wide"}, "",
			"No deprecated API requests in the last 24h (66 older ones within the 720h retention; try --since 720h).\n"},
		// As `report --user alice --since 720h` shows: the requests to the
		// two APIs alice called (8 and 28).
		{"captured", []string{"report", "--user", "alice", "--since", "36h"}, "",
			"No deprecated API requests in the last 36h (36 older ones within the 720h retention; try --since 720h).\n"},
		{"captured", []string{"report", "--since", "720h", "--cluster", "prod"}, "",
			"No deprecated API requests in the last 720h match --cluster prod (4 APIs were requested; without that filter, `sunset report` shows them).\n"},
		{"captured", []string{"check", "--target-version", "1.37"},
			"Safe to upgrade to 1.37: no deprecated API was requested in the last 24h, system users excluded.\n",
			"No deprecated API requests in the last 24h (39 older ones within the 720h retention; try --since 720h).\n"},
		{"mixed", []string{"report"}, "",
			"No deprecated API requests in the last 24h (2 by system users; --exclude-system=false shows them; 1 older one within the 720h retention; try --since 720h).\n"},
		// A window starts at the whole hour since ago: 12:00 holds both.
		{"mixed", []string{"check", "--target-version", "1.37", "--since", "1h"},
			"Safe to upgrade to 1.37: no deprecated API was requested in the last 1h, system users excluded.\n",
			"No deprecated API requests in the last 1h (2 by system users; --exclude-system=false shows them; 1 older one within the 720h retention; try --since 720h).\n"},
		{"system", []string{"report"}, "",
			"No deprecated API requests in the last 24h (1 older one by system users within the 720h retention; try --since 720h --exclude-system=false).\n"},
		{"system", []string{"report", "--since", "720h"}, "",
			"No deprecated API requests in the last 720h (1 by system users; --exclude-system=false shows them).\n"},
	}
	// From the data directories, then through servers on them.
	source := func(dir string) []string { return []string{"--data-dir", dirs[dir]} }
	for round := range 2 {
		if round == 1 {
			urls := map[string]string{}
			for name, dir := range dirs {
				urls[name], _, _ = startServer(t, shiftNow, dir)
			}
			source = func(dir string) []string { return []string{"--server", urls[dir]} }
		}
		for _, tc := range cases {
			name := tc.dir + " " + filepath.Join(tc.args...)
			out, errOut, code := runCLIWith(shiftNow, "", append(tc.args, source(tc.dir)...)...)
			require.Equal(t, 0, code, name)
			require.Equal(t, tc.stdout, out, name)
			require.Equal(t, tc.stderr, errOut, name)
		}
	}
}

// An empty answer says which filter emptied it and what is there without
// it; a name not recorded says which recorded names it may mean.
func TestEmptyResultsNameTheirFilter(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := runCLI("replay", capturedLog, "--node", "master-0", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	for _, tc := range []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{"report", "--state", "removed"}, 0, "",
			"No deprecated API requests in the last 24h match --state removed (4 APIs were requested; without that filter, `sunset report` shows them).\n"},
		{[]string{"report", "--removed-in", "1.40", "--user", "alice"}, 0, "",
			"No deprecated API requests in the last 24h match --removed-in 1.40, --user alice (4 APIs were requested; without those filters, `sunset report` shows them).\n"},
		{[]string{"report", "--cluster", "prod"}, 0, "",
			"No deprecated API requests in the last 24h match --cluster prod (4 APIs were requested; without that filter, `sunset report` shows them).\n"},
		{[]string{"report", "endpoints"}, 1, "", "Error: no deprecated requests to endpoints were recorded; recorded: endpoints.v1\n"},
		{[]string{"report", "nothing.v1"}, 1, "",
			"Error: no deprecated requests to nothing.v1 were recorded (names look like cronjobs.v1beta1.batch; `sunset report` lists them)\n"},
		{[]string{"report", "endpoints.v1", "--cluster", "prod"}, 1, "",
			"Error: no deprecated requests to endpoints.v1 were recorded in cluster \"prod\"; other clusters have some: leave out --cluster\n"},
		{[]string{"report", "webhooks", "--class", "critical"}, 0, "", "No admission webhook annotations on critical resources in the last 24h.\n"},
	} {
		out, errOut, code := runCLI(append(tc.args, "--data-dir", dir)...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		require.Equal(t, tc.out, out, tc.args)
		require.Equal(t, tc.errOut, errOut, tc.args)
	}
}
