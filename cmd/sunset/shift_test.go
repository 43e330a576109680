package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// shiftNow is two days after the capture, minutes into an hour: the day a
// new user tries the quick start. The capture's newest event is at
// 2026-11-21 19:20:50, so --shift-to-now moves everything 42 hours.
var shiftNow = time.Date(2026, 11, 23, 13, 5, 0, 0, time.UTC)

const shiftedLine = "Shifted every timestamp 42h later, so the newest event (2026-11-21 19:20:50 UTC) falls in the current hour.\n"

// A shifted replay shows, on the later day, exactly what the capture showed
// when it was made: the same tables, the same hourly counts.
func TestReplayShiftToNowShowsTheCaptureAsRecent(t *testing.T) {
	unshifted := t.TempDir()
	_, errOut, code := runCLI("replay", capturedLog, "--node", "master-0", "--data-dir", unshifted)
	require.Equal(t, 0, code, errOut)

	shifted := t.TempDir()
	_, errOut, code = runCLIWith(shiftNow, "", "replay", "--shift-to-now", capturedLog, "--node", "master-0", "--data-dir", shifted)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, shiftedLine+
		"Replayed 1393 events from 1 input in T: 66 counted, 0 duplicates, 1327 skipped (611 not_deprecated, 716 skipped_stage), 0 invalid lines.\n", summary(errOut))

	// Unshifted, two days later, the capture is out of every 24h view.
	out, errOut, code := runCLIWith(shiftNow, "", "report", "--data-dir", unshifted)
	require.Equal(t, 0, code)
	require.Empty(t, out)
	require.Equal(t, "No deprecated API requests in the last 24h (39 older ones within the 720h retention; try --since 720h).\n", errOut)

	for _, args := range [][]string{{"report"}, {"report", "--exclude-system=false", "-o", "wide"}, {"check", "--target-version", "1.37"}} {
		then, _, _ := runCLI(append(args, "--data-dir", unshifted)...)
		now, errOut, code := runCLIWith(shiftNow, "", append(args, "--data-dir", shifted)...)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, then, now, args)
	}
	// Every hour keeps its count: the capture's hour (19:00) is now 13:00.
	for _, name := range []string{"componentstatuses.v1", "endpoints.v1", "widgets.v1alpha1.e2e.example.com", "widgets.v1beta1.e2e.example.com"} {
		then := hourlyCounts(t, testNow, unshifted, name)
		now := hourlyCounts(t, shiftNow, shifted, name)
		require.Equal(t, then[19], now[13], name)
		require.Equal(t, then, slices.Concat(now[18:], now[:18]), name)
	}
}

// hourlyCounts is last24h's requestCount per UTC hour of day.
func hourlyCounts(t *testing.T, now time.Time, dataDir, name string) []int64 {
	t.Helper()
	out, errOut, code := runCLIWith(now, "", "report", name, "--data-dir", dataDir, "-o", "json", "--exclude-system=false")
	require.Equal(t, 0, code, errOut)
	var obj sunsetv1.APIRequestCount
	require.NoError(t, json.Unmarshal([]byte(out), &obj))
	counts := make([]int64, len(obj.Status.Last24h))
	for i, h := range obj.Status.Last24h {
		counts[i] = h.RequestCount
	}
	return counts
}

// Shifted and unshifted replays of the same events count them once, in
// either order, offline and through a server; events without an auditID
// too, by the digest of their original line (which the server path, which
// sends rewritten lines, carries as the auditID).
func TestReplayShiftToNowKeepsIdentities(t *testing.T) {
	noID := filepath.Join(t.TempDir(), "no-audit-id.log")
	require.NoError(t, os.WriteFile(noID, []byte(
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"ResponseComplete","verb":"list","user":{"username":"dave"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-22T23:10:00.5Z","annotations":{"k8s.io/deprecated":"true"}}`+"\n"+
			`{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"ResponseComplete","verb":"get","user":{"username":"dave"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-23T01:59:59Z","annotations":{"k8s.io/deprecated":"true"}}`+"\n"), 0o600))
	const (
		shifted = "Shifted every timestamp 12h later, so the newest event (2026-11-23 01:59:59 UTC) falls in the current hour.\n"
		counted = "Replayed 1395 events from 2 inputs in T: 68 counted, 0 duplicates, 1327 skipped (611 not_deprecated, 716 skipped_stage), 0 invalid lines.\n"
		dupes   = "Replayed 1395 events from 2 inputs in T: 0 counted, 68 duplicates, 1327 skipped (611 not_deprecated, 716 skipped_stage), 0 invalid lines.\n"
	)
	url, _, _ := startServer(t, shiftNow, t.TempDir())
	for _, tc := range []struct {
		target       []string
		shiftedFirst bool
	}{
		// Offline the IDs are those decoded from the original lines,
		// whichever order.
		{[]string{"--data-dir", t.TempDir()}, true},
		{[]string{"--server", url, "--cluster", "shifted-first"}, true},
		{[]string{"--server", url, "--cluster", "unshifted-first"}, false},
	} {
		for i, shift := range []bool{tc.shiftedFirst, !tc.shiftedFirst} {
			args := append([]string{"replay", capturedLog, noID, "--node", "master-0"}, tc.target...)
			want := dupes
			if i == 0 {
				want = counted
			}
			if shift {
				args = append(args, "--shift-to-now")
				want = shifted + want
			}
			_, errOut, code := runCLIWith(shiftNow, "", args...)
			require.Equal(t, 0, code, errOut)
			require.Equal(t, want, summary(errOut), "%v shifted: %v", tc.target, shift)
		}
	}
}

// The gaps between events stay, the newest lands in the current hour (here
// 20 minutes ahead of the clock, within it), and standard input works,
// although it is read twice.
func TestReplayShiftToNowKeepsGapsFromStdin(t *testing.T) {
	dir := t.TempDir()
	log := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a","stage":"ResponseComplete","verb":"list","user":{"username":"erin"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-20T02:59:59Z","stageTimestamp":"2026-11-20T03:00:01Z","annotations":{"k8s.io/deprecated":"true"}}
not an event
{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"b","stage":"ResponseComplete","verb":"get","user":{"username":"erin"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-20T05:25:00Z","annotations":{"k8s.io/deprecated":"true"}}
`
	_, _, code := runCLIWith(shiftNow, log, "replay", "-", "--shift-to-now", "--node", "n", "--data-dir", dir, "--exclude-system=false")
	require.Equal(t, 1, code, "replay has no --exclude-system")
	_, errOut, code := runCLIWith(shiftNow, log, "replay", "-", "--shift-to-now", "--node", "n", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Shifted every timestamp 80h later, so the newest event (2026-11-20 05:25:00 UTC) falls in the current hour.\n"+
		"Replayed 2 events from 1 input in T: 2 counted, 0 duplicates, 0 skipped, 1 invalid lines.\n"+
		"First invalid lines:\n  -:2: malformed_json: event is not valid JSON at byte offset 2: invalid character 'o' in literal null (expecting 'u')\n", summary(errOut))
	counts := hourlyCounts(t, shiftNow, dir, "endpoints.v1")
	want := make([]int64, 24)
	want[10], want[13] = 1, 1 // 02:59:59 + 80h = 10:59:59; 05:25 + 80h = 13:25
	require.Equal(t, want, counts)
}
