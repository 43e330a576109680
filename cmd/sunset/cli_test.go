package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/testutil/golden"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// testNow is the clock of the captured traffic, minutes after its last
// event.
var testNow = ingesttest.CapturedNow

// fixtureBatch is one webhook body of the fixture and the path it is
// posted to.
type fixtureBatch struct {
	cluster, node string
	body          []byte
}

// fixtureBatches are the fixture's data: the captured bodies on master-0 of
// cluster default, a storage v1beta1 client (removed in 1.37) on master-2,
// and on master-1 of cluster prod an already-removed batch/v1beta1 CronJob
// client.
func fixtureBatches(t *testing.T) []fixtureBatch {
	t.Helper()
	names, err := filepath.Glob("../../testdata/apiserver-v1.36/webhook-metadata-batch/*.body")
	require.NoError(t, err)
	require.Len(t, names, 8)
	sort.Strings(names)
	var out []fixtureBatch
	for _, n := range names {
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		out = append(out, fixtureBatch{"default", "master-0", b})
	}
	return append(out,
		fixtureBatch{"prod", "master-1", []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[
		{"auditID":"cj-1","stage":"ResponseComplete","verb":"list","user":{"username":"system:serviceaccount:ci:deployer"},"userAgent":"helm/v3.14.0 (linux)","objectRef":{"resource":"cronjobs","apiGroup":"batch","apiVersion":"v1beta1","namespace":"ci"},"responseStatus":{"code":404},"requestReceivedTimestamp":"2026-11-21T18:05:00Z"},
		{"auditID":"cj-2","stage":"ResponseComplete","verb":"create","user":{"username":"system:serviceaccount:ci:deployer"},"userAgent":"helm/v3.14.0 (linux)","objectRef":{"resource":"cronjobs","apiGroup":"batch","apiVersion":"v1beta1","namespace":"ci"},"responseStatus":{"code":404},"requestReceivedTimestamp":"2026-11-21T19:05:00Z"}]}`)},
		fixtureBatch{"default", "master-2", []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[
		{"auditID":"vac-1","stage":"ResponseComplete","verb":"get","user":{"username":"carol"},"userAgent":"terraform/1.9.0","objectRef":{"resource":"volumeattributesclasses","apiGroup":"storage.k8s.io","apiVersion":"v1beta1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-21T07:00:00Z","annotations":{"k8s.io/deprecated":"true","k8s.io/removed-release":"1.37"}}]}`)},
	)
}

// fixture starts a server with fixtureBatches.
func fixture(t *testing.T) (url, dataDir string, stop func()) {
	t.Helper()
	url, dataDir, stop = startServer(t, testNow, t.TempDir())
	for _, b := range fixtureBatches(t) {
		path := "/audit/webhook/" + b.node
		if b.cluster != "default" {
			path = "/audit/webhook/" + b.cluster + "/" + b.node
		}
		resp, err := http.Post(url+path, "application/json", bytes.NewReader(b.body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
	}
	return url, dataDir, stop
}

// startServer runs a server on dataDir whose clock says now, until the
// test ends or stop is called.
func startServer(t *testing.T, now time.Time, dataDir string) (url, _ string, stop func()) {
	t.Helper()
	cfg := testserver.Config(t)
	cfg.DataDir = dataDir
	s := testserver.Start(t, cfg, app.Options{Now: func() time.Time { return now }})
	return s.URL, cfg.DataDir, s.Stop
}

// runCLI runs sunset with args and returns stdout, stderr and the exit code.
func runCLI(args ...string) (string, string, int) {
	return runCLIWith(testNow, "", args...)
}

// runCLIWith runs sunset with a clock that says now and stdin as standard
// input.
func runCLIWith(now time.Time, stdin string, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), console{stdout: &out, stderr: &errOut, stdin: strings.NewReader(stdin), now: func() time.Time { return now }}, args)
	return out.String(), errOut.String(), code
}

func TestReportFormatsGolden(t *testing.T) {
	url, dataDir, stop := fixture(t)
	cases := map[string][]string{
		"report-table.golden":          {"report"},
		"report-wide.golden":           {"report", "-o", "wide"},
		"report-json.golden":           {"report", "-o", "json"},
		"report-yaml.golden":           {"report", "-o", "yaml"},
		"report-with-system.golden":    {"report", "--exclude-system=false"},
		"report-removed-before.golden": {"report", "--removed-before", "1.38", "--since", "48h"},
		"report-user.golden":           {"report", "--user", "bob", "-o", "wide"},
		"report-describe.golden":       {"report", "widgets.v1beta1.e2e.example.com"},
		"report-describe-cron.golden":  {"report", "cronjobs.v1beta1.batch", "--exclude-system=false"},
		"report-describe-yaml.golden":  {"report", "endpoints.v1", "-o", "yaml", "--cluster", "default"},
		"report-name.golden":           {"report", "-o", "name"},
		"report-no-headers.golden":     {"report", "--no-headers"},
		"report-jsonpath.golden":       {"report", "-o", `jsonpath={range .items[?(@.status.removedInRelease!="")]}{.status.removedInRelease}{"\t"}{.metadata.name}{"\n"}{end}`},
		"report-custom-columns.golden": {"report", "-o", "custom-columns=NAME:.metadata.name,STATE:.metadata.labels.sunset\\.dev/state,REQUESTS:.status.requestCount", "--exclude-system=false"},
		"report-describe-name.golden":  {"report", "endpoints.v1", "-o", "name"},
	}
	outputs := map[string]string{}
	for file, args := range cases {
		t.Run(file, func(t *testing.T) {
			out, errOut, code := runCLI(append(args, "--server", url)...)
			require.Equal(t, 0, code, errOut)
			require.Empty(t, errOut)
			golden.Assert(t, "testdata/"+file, []byte(out))
			requireGoldenNumbers(t, file, out)
			outputs[file] = out
		})
	}

	// A data directory gives the same answers, once the server has let go.
	stop()
	for file, args := range cases {
		out, errOut, code := runCLI(append(args, "--data-dir", dataDir)...)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, outputs[file], out, file)
	}
}

func TestCheckExitCodes(t *testing.T) {
	url, _, _ := fixture(t)
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string
	}{
		{"already-removed clients fail any target", []string{"--target-version", "1.24"}, 3, "check-removed.golden"},
		{"only deprecated APIs", []string{"--target-version", "1.36", "--cluster", "default"}, 0, "check-safe.golden"},
		{"warnings as errors", []string{"--target-version", "1.36", "--cluster", "default", "--warnings-as-errors"}, 2, "check-warnings.golden"},
		{"removed at the target", []string{"--target-version", "v1.37.0", "--cluster", "default"}, 3, "check-target.golden"},
		{"json", []string{"--target-version", "1.37", "-o", "json", "--since", "48h"}, 3, "check-json.golden"},
		{"system traffic included", []string{"--target-version", "1.36", "--cluster", "default", "--exclude-system=false"}, 0, "check-with-system.golden"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(append([]string{"check", "--server", url}, tc.args...)...)
			require.Equal(t, tc.code, code, errOut)
			require.Empty(t, errOut)
			golden.Assert(t, "testdata/"+tc.golden, []byte(out))
			requireGoldenNumbers(t, tc.golden, out)
		})
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"check"}, "Error: --target-version is required, e.g. --target-version 1.37\n"},
		{[]string{"check", "--target-version", "next"}, "Error: --target-version: \"next\" is not a Kubernetes release such as 1.37\n"},
		{[]string{"check", "--target-version", "1.37", "-o", "yaml"}, "Error: -o \"yaml\" is not one of text, json\n"},
		{[]string{"check", "--target-version", "1.37", "--server", "http://127.0.0.1:1"}, "Error: cannot reach Sunset at http://127.0.0.1:1"},
		{[]string{"check", "--target-version", "1.37", "--server", url, "--data-dir", "/tmp"}, "Error: give one of --server, --data-dir and --kubeconfig/--context\n"},
		{[]string{"check", "--target-version", "1.37", "--server", url, "--kubeconfig", "/tmp/k"}, "Error: give one of --server, --data-dir and --kubeconfig/--context\n"},
		{[]string{"check", "--target-version", "1.37", "--kubeconfig", "/nonexistent/kubeconfig"}, "Error: loading the kubeconfig: "},
		{[]string{"report", "--server", url, "nothing.v1"}, "Error: no deprecated requests to nothing.v1 were recorded (names look like cronjobs.v1beta1.batch; `sunset report` lists them)\n"},
		{[]string{"report", "--server", url, "-o", "csv"}, "Error: -o \"csv\" is not one of table, wide, json, yaml\n"},
		{[]string{"report", "--server", url, "--since", "30m"}, "Error: --since 30m0s is shorter than 1h; counts are hourly\n"},
	} {
		_, errOut, code := runCLI(tc.args...)
		require.Equal(t, 1, code, tc.args)
		require.True(t, strings.HasPrefix(errOut, tc.msg), "%v: %s", tc.args, errOut)
	}
}

// A data directory a server holds is refused, with that server's address
// from the config given with --config; without it the default listen
// address is named only as the default, since the server may listen
// elsewhere.
func TestDataDirLockedByServer(t *testing.T) {
	url, dataDir, _ := fixture(t)
	_, errOut, code := runCLI("report", "--data-dir", dataDir)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is in use by another Sunset process")
	require.Contains(t, errOut, "\nA running server holds the data directory: ask it instead with --server and the address it listens on "+
		"(serve's --listen, http://localhost:8080 when not set)\n")

	config := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(config, []byte("listen: "+strings.TrimPrefix(url, "http://")+"\n"), 0o600))
	_, errOut, code = runCLI("report", "--data-dir", dataDir, "--config", config)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "\nA running server holds the data directory: ask it instead with --server "+url+
		" (the listen address of "+config+", unless the server was started with another --listen)\n")
}

// Every bad flag is named at once, before any server is contacted: the
// server here does not exist.
func TestEveryBadFlagAtOnce(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "-o", "csv", "--removed-in", "x", "--state", "gone", "--since", "5m"}, `Error: -o "csv" is not one of table, wide, json, yaml
--since 5m0s is shorter than 1h; counts are hourly
--removed-in: "x" is not a Kubernetes release such as 1.37
--state "gone" is not one of deprecated, removed
`},
		{[]string{"check", "-o", "yaml", "--since", "5m"}, `Error: --target-version is required, e.g. --target-version 1.37
--since 5m0s is shorter than 1h; counts are hourly
-o "yaml" is not one of text, json
`},
		{[]string{"report", "webhooks", "-o", "csv", "--class", "x", "--since", "5m"}, `Error: -o "csv" is not one of table, wide, json, yaml
--since 5m0s is shorter than 1h; counts are hourly
--class "x" is not one of critical, security, virtual
`},
	} {
		out, errOut, code := runCLI(append(tc.args, "--server", "http://127.0.0.1:1")...)
		require.Equal(t, 1, code, tc.args)
		require.Empty(t, out)
		require.Equal(t, tc.want, errOut, tc.args)
	}
}
