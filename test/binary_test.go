package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// A kill -9 at an arbitrary moment loses no acknowledged batch and commits
// none in part; the apiserver's retry of everything then counts each request
// exactly once.
func TestKillNineLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	dir := t.TempDir()
	p := startBinary(t, dir)
	const n = 60
	var once sync.Once
	now := time.Now().UTC()
	acked := sendConcurrently(p.url, now, n, func(total int64) {
		if total == 25 {
			once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
		}
	})
	<-p.exited

	p = startBinary(t, dir)
	got := counts(t, p.url)
	ackedCount := 0
	for i := 0; i < n; i++ {
		if acked[i] {
			ackedCount++
			require.Equal(t, int64(100), got[apiName(i)], "acknowledged batch %d", i)
		} else {
			require.Contains(t, []int64{0, 100}, got[apiName(i)], "batch %d is all or nothing", i)
		}
	}
	require.GreaterOrEqual(t, ackedCount, 25)
	t.Logf("%d of %d batches acknowledged before the kill; %d APIs on disk after restart", ackedCount, n, len(got))

	// The apiserver re-sends what was not acknowledged; re-send everything.
	acked = sendConcurrently(p.url, now, n, func(int64) {})
	for i := 0; i < n; i++ {
		require.True(t, acked[i])
	}
	got = counts(t, p.url)
	require.Len(t, got, n)
	for i := 0; i < n; i++ {
		require.Equal(t, int64(100), got[apiName(i)], "batch %d", i)
	}
}

// SIGTERM drains: batches in flight finish, the process exits 0 and a
// restart shows every acknowledged batch.
func TestSigtermDrainsInFlightBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	dir := t.TempDir()
	p := startBinary(t, dir)
	var once sync.Once
	acked := sendConcurrently(p.url, time.Now().UTC(), 40, func(total int64) {
		if total == 10 {
			once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGTERM) })
		}
	})
	require.NoError(t, <-p.exited, "exit status after SIGTERM; stderr:\n%s", p.stderr)
	require.Contains(t, p.stderr.String(), `"message":"sunset stopped"`)

	p = startBinary(t, dir)
	got := counts(t, p.url)
	ackedCount := 0
	for i, ok := range acked {
		if ok {
			ackedCount++
			require.Equal(t, int64(100), got[apiName(i)], "acknowledged batch %d", i)
		}
	}
	require.Len(t, got, ackedCount, "nothing unacknowledged was committed after the drain")
}

func TestUnknownConfigIsRejected(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("listen: 127.0.0.1:0\nlisten-adress: oops\nretention: 1h\n"), 0o600)) //nolint:misspell // The unknown key under test.
	cmd := exec.Command(sunsetBin, "serve", "--config", cfgFile, "--user-agent", "medium")
	cmd.Env = append(os.Environ(), "SUNSET_DATADIR=/tmp/x")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.ExitCode())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 2, string(out))
	require.True(t, strings.HasPrefix(lines[0], "Error: config file "+cfgFile+": unknown keys listen-adress; known keys are data-dir, listen, "), lines[0]) //nolint:misspell // The unknown key under test.
	for _, key := range []string{"clusters.*.version", "kafka.sasl.password", "metrics.removal-horizon", "ingest.files"} {
		require.Contains(t, lines[0], key)
	}
	require.Equal(t, "environment variable SUNSET_DATADIR matches no config key", lines[1])

	// Nested keys come from the environment too, and are validated.
	cmd = exec.Command(sunsetBin, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SUNSET_KAFKA_TOPICS=audit", "SUNSET_KAFKA_SASL_MECHANISM=kerberos", "SUNSET_KAFKA_STARTOFFSET=middle")
	out, _ = cmd.CombinedOutput()
	require.Equal(t, `Error: kafka.brokers: is required when kafka.topics is set, e.g. [kafka-0:9092]
kafka.sasl.mechanism: "kerberos" is not one of plain, scram-sha-256, scram-sha-512
kafka.startOffset: "middle" is not one of earliest, latest
`, string(out))

	// With the keys fixed, every invalid value is reported at once.
	require.NoError(t, os.WriteFile(cfgFile, []byte("listen: 127.0.0.1:0\nretention: 1h\n"), 0o600))
	cmd = exec.Command(sunsetBin, "serve", "--config", cfgFile, "--user-agent", "medium", "--data-dir", "")
	out, err = cmd.CombinedOutput()
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.ExitCode())
	require.Equal(t, `Error: data-dir: must not be empty
user-agent: "medium" is not one of short, full
retention: 1h0m0s is shorter than the 24h the API reports
metrics.window: 24h0m0s must be from 1h to the retention (1h0m0s)
`, string(out))

	// Environment variables are read.
	cmd = exec.Command(sunsetBin, "serve", "--data-dir", "")
	cmd.Env = append(os.Environ(), "SUNSET_USER_AGENT=tiny")
	out, _ = cmd.CombinedOutput()
	require.Equal(t, "Error: data-dir: must not be empty\nuser-agent: \"tiny\" is not one of short, full\n", string(out))
}

// The structured keys decode from a real YAML file through the binary's
// config loader: catalog.extra, clusters.<name>.version and system-users.
func TestConfigFileCatalogClustersAndSystemUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	cfgFile := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`
system-users: ["system:serviceaccount:ops:*"]
clusters:
  minikube:
    version: v1.15.3
catalog:
  extra:
    - group: cert-manager.io
      version: v1alpha2
      resource: certificates
      kind: Certificate
      deprecatedIn: "1.20"
      removedIn: "1.24"
      replacement: {group: cert-manager.io, version: v1, kind: Certificate, resource: certificates}
`), 0o600))
	p := startBinary(t, t.TempDir(), "--config", cfgFile)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	// An unannotated request on the 1.15 cluster counts by its version.
	deployment := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"d1","stage":"ResponseComplete","verb":"create","user":{"username":"system:serviceaccount:ops:deployer"},"objectRef":{"resource":"deployments","apiGroup":"extensions","apiVersion":"v1beta1"},"responseStatus":{"code":201},"requestReceivedTimestamp":"` + now + `"}`
	// A 404 from a cluster of unknown version to an API the extra catalog
	// lists as removed is an already-removed request.
	certificate := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"c1","stage":"ResponseComplete","verb":"get","user":{"username":"bob"},"objectRef":{"resource":"certificates","apiGroup":"cert-manager.io","apiVersion":"v1alpha2"},"responseStatus":{"code":404},"requestReceivedTimestamp":"` + now + `"}`
	for path, body := range map[string]string{"/audit/webhook/minikube/master": deployment, "/audit/webhook/prod/master": certificate} {
		resp, err := http.Post(p.url+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
	}

	var got struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct {
				RemovedInRelease   string
				Warning            string
				Removed            bool
				SystemRequestCount int64
			}
		}
	}
	r, err := http.Get(p.url + "/apis/sunset.dev/v1/apirequestcounts")
	require.NoError(t, err)
	defer r.Body.Close()
	require.NoError(t, json.NewDecoder(r.Body).Decode(&got))
	require.Len(t, got.Items, 2)
	c, d := got.Items[0], got.Items[1]
	require.Equal(t, "certificates.v1alpha2.cert-manager.io", c.Metadata.Name)
	require.Equal(t, "deployments.v1beta1.extensions", d.Metadata.Name)
	require.Equal(t, "1.16", d.Status.RemovedInRelease)
	require.Equal(t, "extensions/v1beta1 Deployment is deprecated in v1.8+, unavailable in v1.16+; use apps/v1 Deployment", d.Status.Warning)
	require.Equal(t, int64(1), d.Status.SystemRequestCount)
	require.Equal(t, "cert-manager.io/v1alpha2 Certificate is deprecated in v1.20+, unavailable in v1.24+; use cert-manager.io/v1 Certificate", c.Status.Warning)
	require.Equal(t, "1.24", c.Status.RemovedInRelease)
	require.True(t, c.Status.Removed)
	require.False(t, d.Status.Removed)
}

// `sunset serve` follows an audit log from its config; a kill -9 and a
// restart in the middle of the file give exact counts.
func TestServeFollowsAuditLogAcrossKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	logDir, dataDir := t.TempDir(), t.TempDir()
	logPath := filepath.Join(logDir, "audit.log")
	cfgFile := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("ingest:\n  files:\n    - path: "+logPath+"\n      node: master-0\n      cluster: prod\n"), 0o600))
	now := time.Now().UTC()
	write := func(from, n int) {
		f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		require.NoError(t, err)
		defer f.Close()
		for i := from; i < from+n; i++ {
			_, err := fmt.Fprintf(f, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"f-%d","stage":"ResponseComplete","verb":"list","user":{"username":"ci"},"objectRef":{"resource":"cronjobs","apiGroup":"batch","apiVersion":"v1beta1"},"requestReceivedTimestamp":%q,"annotations":{"k8s.io/deprecated":"true","k8s.io/removed-release":"1.25"}}`+"\n", i, now.Format(time.RFC3339Nano))
			require.NoError(t, err)
		}
	}
	var p *process
	waitCount := func(want int64) {
		t.Helper()
		var got int64
		err := p.await(20*time.Second, testserver.RecheckGap, func() bool {
			got = counts(t, p.url)["cronjobs.v1beta1.batch"]
			return got >= want
		})
		require.Equal(t, want, got, "%v", err)
	}
	write(0, 1000)
	p = startBinary(t, dataDir, "--config", cfgFile, "--log-level", "debug")
	waitCount(1000)
	write(1000, 500)
	waitCount(1500)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited

	write(1500, 250)
	p = startBinary(t, dataDir, "--config", cfgFile, "--log-level", "debug")
	waitCount(1750)
	// The count reached 1500 before the kill, and the position is
	// committed with the counts, so the restarted process reads the 250
	// new lines and nothing before them: once it has taken in 250 events
	// it is at the end of the file, with nothing left to count again.
	fileEvents := func() float64 {
		var n float64
		for name, v := range scrape(t, p.url, "sunset_ingest_events_total{") {
			if strings.Contains(name, `source="file"`) {
				n += v
			}
		}
		return n
	}
	// The metrics are counted before "commit finished"; the count can be
	// read a moment earlier.
	require.NoError(t, p.await(20*time.Second, 0, func() bool { return fileEvents() >= 250 }))
	require.Equal(t, 250, int(fileEvents()), "the restart read the new lines only")
	require.Equal(t, int64(1750), counts(t, p.url)["cronjobs.v1beta1.batch"], "nothing counted twice after the restart")
}
