package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/admission"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/golden"
)

// webhookFixture is fixture's server with the crafted admission shapes
// (admission/testdata/README.md) added on cluster prod.
func webhookFixture(t *testing.T) (url, dataDir string, stop func()) {
	t.Helper()
	url, dataDir, stop = fixture(t)
	f, err := os.Open("../../admission/testdata/crafted-events.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var body bytes.Buffer
	body.WriteString(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`)
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(sc.Bytes()) // a standalone event's kind and apiVersion are accepted in a list
	}
	require.NoError(t, sc.Err())
	body.WriteString(`]}`)
	resp, err := http.Post(url+"/audit/webhook/prod/master-0", "application/json", &body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return url, dataDir, stop
}

// The tables, from a server and from its data directory alike.
func TestReportWebhooksGolden(t *testing.T) {
	url, dataDir, stop := webhookFixture(t)
	cases := []struct {
		golden string
		args   []string
	}{
		{"report-webhooks.txt", []string{"report", "webhooks"}},
		{"report-webhooks-security-wide.txt", []string{"report", "webhooks", "--class", "security", "-o", "wide"}},
		{"report-webhooks-istio.txt", []string{"report", "webhooks", "istio-sidecar-injector.sidecar-injector.istio.io"}},
	}
	fromServer := map[string]string{}
	for _, tc := range cases {
		out, errOut, code := runCLI(append(tc.args, "--server", url)...)
		require.Equal(t, 0, code, errOut)
		golden.Assert(t, "testdata/"+tc.golden, []byte(out))
		requireGoldenNumbers(t, tc.golden, out)
		fromServer[tc.golden] = out
	}
	out, errOut, code := runCLI("report", "webhooks", "--server", url, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var list struct {
		Kind  string
		Items []struct{ Metadata struct{ Name string } }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Equal(t, "WebhookCountList", list.Kind)
	require.Len(t, list.Items, 7)

	_, errOut, code = runCLI("report", "webhooks", "--server", url, "nope.example.com")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no audit annotation named webhook nope.example.com in the last 24h")
	out, errOut, code = runCLI("report", "webhooks", "--server", url, "--cluster", "nowhere", "--class", "critical")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, out)
	require.Equal(t, "No admission webhook annotations on critical resources in cluster \"nowhere\" in the last 24h "+
		"(7 webhooks were seen; without --class critical and --cluster nowhere, `sunset report webhooks` shows them).\n", errOut)
	_, errOut, code = runCLI("report", "webhooks", "--server", url, "--class", "hot", "--since", "30m")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `--since 30m0s is shorter than 1h`)
	require.Contains(t, errOut, `--class "hot" is not one of critical, security, virtual`)

	stop()
	for _, tc := range cases {
		out, errOut, code := runCLI(append(tc.args, "--data-dir", dataDir)...)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, fromServer[tc.golden], out, tc.golden)
	}
	checkWebhookCertificatesReport(t)
}

// checkWebhookCertificatesReport: the webhook servers kube-apiserver
// flagged (admission/testdata/certificate-events.jsonl) get a table of
// their own after the webhooks, from a server and its data directory
// alike, with the API's numbers. The golden is in a directory of its own:
// its numbers are checked here, against the JSON.
func checkWebhookCertificatesReport(t *testing.T) {
	url, dataDir, stop := startServer(t, testNow, t.TempDir())
	lines, err := os.ReadFile("../../admission/testdata/certificate-events.jsonl")
	require.NoError(t, err)
	body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(strings.Split(strings.TrimSpace(string(lines)), "\n"), ",") + `]}`
	resp, err := http.Post(url+"/audit/webhook/prod/master-0", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	out, errOut, code := runCLI("report", "webhooks", "--server", url)
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "testdata/webhook-certificates/report-webhooks.txt", []byte(out))

	js, errOut, code := runCLI("report", "webhooks", "--server", url, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var list sunsetv1.WebhookCountList
	require.NoError(t, json.Unmarshal([]byte(js), &list))
	tables := strings.Split(strings.TrimRight(out, "\n"), "\n\n")
	require.Len(t, tables, 3)
	rows := strings.Split(tables[2], "\n")[1:]
	require.Len(t, rows, len(list.Certificates))
	for i, c := range list.Certificates {
		require.Equal(t, []string{c.Host, c.Cluster, c.Problem, c.RefusedByDefaultInRelease, c.RefusedInRelease, strconv.FormatInt(c.RequestCount, 10),
			c.ByResource[0].Name}, strings.Fields(rows[i]), c.Host)
	}
	stop()
	fromDir, errOut, code := runCLI("report", "webhooks", "--data-dir", dataDir)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, out, fromDir)
}

// The admission keys load from a config file; unknown ones are errors.
func TestAdmissionConfigKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sunset.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
admission:
  classes:
    critical: [pods, nodes/status]
    virtual: ["*reviews"]
  webhooks:
    - configuration: vault
      webhook: vault-validator.example.com
  metrics:
    max-resources: 20
`), 0o600))
	cfg, err := config.Load(config.Flags(), path)
	require.NoError(t, err)
	d := admission.DefaultClasses()
	require.Equal(t, config.AdmissionConfig{
		Classes:  config.AdmissionClasses{Critical: []string{"pods", "nodes/status"}, Security: d[admission.Security], Virtual: []string{"*reviews"}},
		Webhooks: []admission.WebhookID{{Configuration: "vault", Webhook: "vault-validator.example.com"}},
		Metrics:  config.AdmissionMetrics{MaxResources: 20, MaxWebhooks: admission.DefaultMaxWebhooks},
	}, cfg.Admission)

	// The environment beats the file.
	t.Setenv("SUNSET_ADMISSION_CLASSES_VIRTUAL", "bindings,*reviews,pods/binding")
	t.Setenv("SUNSET_ADMISSION_METRICS_MAX_WEBHOOKS", "7")
	cfg, err = config.Load(config.Flags(), path)
	require.NoError(t, err)
	require.Equal(t, []string{"bindings", "*reviews", "pods/binding"}, cfg.Admission.Classes.Virtual)
	require.Equal(t, 7, cfg.Admission.Metrics.MaxWebhooks)

	require.NoError(t, os.WriteFile(path, []byte("admission:\n  classes:\n    hot: [pods]\n"), 0o600))
	_, err = config.Load(config.Flags(), path)
	require.ErrorContains(t, err, "unknown keys admission.classes.hot")
}
