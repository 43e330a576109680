package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/golden"
)

const capturedLog = "../../testdata/apiserver-v1.36/webhook-metadata-batch/audit-log-file.jsonl"

// elapsedRe hides the one varying part of a replay summary.
var elapsedRe = regexp.MustCompile(` in [0-9.]+[µm]?s:`)

func summary(stderr string) string { return elapsedRe.ReplaceAllString(stderr, " in T:") }

// Replaying the log file kube-apiserver wrote gives exactly what its webhook
// bodies gave (fixture, cluster default, node master-0), and a second replay
// counts nothing new.
func TestReplayMatchesWebhook(t *testing.T) {
	_, webhookDir, stop := fixture(t)
	stop()
	dir := t.TempDir()
	_, errOut, code := runCLI("replay", capturedLog, "--node", "master-0", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Replayed 1393 events from 1 input in T: 66 counted, 0 duplicates, 1327 skipped (611 not_deprecated, 716 skipped_stage), 0 invalid lines.\n", summary(errOut))
	_, errOut, code = runCLI("replay", capturedLog, "--node", "master-0", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Replayed 1393 events from 1 input in T: 0 counted, 66 duplicates, 1327 skipped (611 not_deprecated, 716 skipped_stage), 0 invalid lines.\n", summary(errOut))

	fromLog, _, _ := runCLI("report", "--data-dir", dir, "-o", "json", "--exclude-system=false", "--cluster", "default")
	fromWebhook, _, _ := runCLI("report", "--data-dir", webhookDir, "-o", "json", "--exclude-system=false", "--cluster", "default",
		// The fixture also has a storage client on master-2.
		"--removed-in", "1.0")
	require.NotEqual(t, fromLog, fromWebhook, "sanity: the filter above selects nothing")
	for _, name := range []string{"componentstatuses.v1", "endpoints.v1", "widgets.v1alpha1.e2e.example.com", "widgets.v1beta1.e2e.example.com"} {
		a, _, _ := runCLI("report", name, "--data-dir", dir, "-o", "json", "--cluster", "default")
		b, _, _ := runCLI("report", name, "--data-dir", webhookDir, "-o", "json", "--cluster", "default")
		require.Equal(t, b, a, name)
	}
}

func TestReplayThirdPartySamplesAndHugeLines(t *testing.T) {
	dir := t.TempDir()
	samples := "../../testdata/public/"
	out, errOut, code := runCLI("replay", samples+"falco-k8s_audit-trace_files.jsonl", samples+"audit2rbac-demo.log",
		samples+"aks-kube-audit-event-deprecated-sar-v1beta1.jsonl", "--node", "n", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, out)
	require.Equal(t, "Replayed 89 events from 3 inputs in T: 0 counted, 0 duplicates, 89 skipped (1 expired, 86 not_deprecated, 2 skipped_stage), 1 invalid lines.\n"+
		"First invalid lines:\n"+
		"  ../../testdata/public/falco-k8s_audit-trace_files.jsonl:49: malformed_event: event field \"kind\" is a JSON number, want a string\n", summary(errOut))

	// The Falco deployments count when the cluster's version is known.
	cfg := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("clusters:\n  minikube:\n    version: \"1.15\"\nretention: 87600h\n"), 0o600))
	out, errOut, code = runCLI("replay", samples+"falco-k8s_audit-trace_files.jsonl", "--cluster", "minikube", "--node", "minikube",
		"--config", cfg, "--dry-run=client")
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "testdata/replay-falco-1.15.golden", []byte(out))
	requireGoldenNumbers(t, "replay-falco-1.15.golden", out)

	// A RequestResponse event of 1 MiB, far past bufio.Scanner's 64 KiB.
	big := filepath.Join(t.TempDir(), "big.log")
	line := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"big-1","stage":"ResponseComplete","verb":"update","user":{"username":"alice"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-21T19:00:00Z","annotations":{"k8s.io/deprecated":"true"},"requestObject":{"data":"` + strings.Repeat("a", 1<<20) + `"}}`
	require.NoError(t, os.WriteFile(big, []byte(line+"\n"), 0o600))
	_, errOut, code = runCLI("replay", big, "--node", "n", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Replayed 1 events from 1 input in T: 1 counted, 0 duplicates, 0 skipped, 0 invalid lines.\n", summary(errOut))
}

func TestReplayThroughServerAndDryRuns(t *testing.T) {
	url, _, _ := fixture(t)
	// Server dry run: duplicates found against what the server has, nothing stored.
	out, errOut, code := runCLI("replay", capturedLog, "--node", "master-0", "--server", url, "--dry-run=server")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "API   HOUR   NODE   USER   USER AGENT   VERB   WOULD COUNT\n", out)
	require.Equal(t, "Dry run (server): read 1393 events from 1 input in T: 0 would be counted, 66 duplicates, 1327 skipped (611 not_deprecated, 716 skipped_stage), 0 invalid lines.\n", summary(errOut))

	out, errOut, code = runCLI("replay", capturedLog, "--node", "master-9", "--cluster", "lab", "--server", url, "--dry-run=server")
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "testdata/replay-dry-run.golden", []byte(out))
	requireGoldenNumbers(t, "replay-dry-run.golden", out)
	require.Equal(t, "Dry run (server): read 1393 events from 1 input in T: 66 would be counted, 0 duplicates, 1327 skipped (611 not_deprecated, 716 skipped_stage), 0 invalid lines.\n", summary(errOut))
	outClient, _, _ := runCLI("replay", capturedLog, "--node", "master-9", "--dry-run=client")
	require.Equal(t, out, outClient, "client and server dry runs agree")
	_, errOut, code = runCLI("report", "--server", url, "--cluster", "lab")
	require.Equal(t, 0, code)
	require.Equal(t, "No deprecated API requests in the last 24h match --cluster lab (6 APIs were requested; without that filter, `sunset report` shows them).\n", errOut,
		"the dry runs stored nothing")

	// A real replay through the server's webhook.
	_, errOut, code = runCLI("replay", capturedLog, "--node", "master-9", "--cluster", "lab", "--server", url)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Replayed 1393 events from 1 input in T: 66 counted, 0 duplicates, 1327 skipped (611 not_deprecated, 716 skipped_stage), 0 invalid lines.\n", summary(errOut))
	out, _, _ = runCLI("report", "--server", url, "--cluster", "lab", "--exclude-system=false")
	require.Contains(t, out, "endpoints.v1                       -            35                        35")

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"replay", capturedLog, "--dry-run=maybe"}, `Error: --dry-run "maybe" is not one of none, client, server`},
		{[]string{"replay", capturedLog, "--dry-run=server"}, "Error: --dry-run=server needs --server"},
		{[]string{"replay", "/nonexistent.log", "--dry-run=client"}, "Error: stat /nonexistent.log: no such file or directory"},
		{[]string{"replay"}, "Error: requires at least 1 arg(s), only received 0"},
	} {
		_, errOut, code := runCLI(tc.args...)
		require.Equal(t, 1, code, tc.args)
		require.Equal(t, tc.msg+"\n", errOut, tc.args)
	}
}

// Dry runs in the Request-level capture are counted apart: 9 with
// dryRun=All in the URI and 2 deletes with it only in the DeleteOptions body
// (client-output-dryrun.txt).
func TestReplayCountsDryRunsApart(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := runCLI("replay", "../../testdata/apiserver-v1.36/request-level-blocking/audit-log-file.jsonl", "--node", "master-0", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	dry := map[string][2]int64{}
	for _, name := range []string{"deviceclasses.v1beta1.resource.k8s.io", "endpoints.v1", "widgets.v1beta1.e2e.example.com", "volumeattributesclasses.v1beta1.storage.k8s.io"} {
		out, errOut, code := runCLI("report", name, "--data-dir", dir, "-o", "json", "--since", "720h")
		require.Equal(t, 0, code, errOut)
		var obj struct {
			Status struct {
				Window struct{ RequestCount int64 }
				// requestCount and dryRunCount over all hours, from last24h
				Last24h []struct{ RequestCount, DryRunCount int64 }
			}
		}
		require.NoError(t, json.Unmarshal([]byte(out), &obj))
		var d int64
		for _, h := range obj.Status.Last24h {
			d += h.DryRunCount
		}
		dry[name] = [2]int64{obj.Status.Window.RequestCount, d}
	}
	require.Equal(t, map[string][2]int64{
		"deviceclasses.v1beta1.resource.k8s.io":          {1, 1},
		"endpoints.v1":                                   {20, 1},
		"widgets.v1beta1.e2e.example.com":                {47, 9},
		"volumeattributesclasses.v1beta1.storage.k8s.io": {4, 0},
	}, dry)
}

// flagHelp is the help text of each of names among cmd's flags.
func flagHelp(cmd *cobra.Command, names ...string) map[string]string {
	out := map[string]string{}
	for _, name := range names {
		out[name] = cmd.Flags().Lookup(name).Usage
	}
	return out
}

// replay writes: its help says where, and which of the config file's keys
// it counts with, rather than what the read commands say of theirs.
func TestReplayHelpSaysWhereItWrites(t *testing.T) {
	require.Equal(t, map[string]string{
		"data-dir": "the data directory to count into, which no running server may hold (default: --config's data-dir, else ./sunset-data)",
		"config":   "the server's config file, to count as it does: its data-dir, clusters, catalog.extra, field-rules, user-agent and retention",
		"server":   "count through the webhook of the running Sunset at this URL, instead of into a data directory",
	}, flagHelp(newReplayCommand(console{}), "data-dir", "config", "server"))
}
