package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// sunsetBin is the binary under test; loadgenBin sends it audit events
// through kube-apiserver's webhook client. Neither has the race detector,
// whatever the tests run with.
var sunsetBin, loadgenBin string

func TestMain(m *testing.M) {
	if os.Getenv(inNetns) != "" {
		// The copy of TestQuickStart in its own network namespace runs
		// make demo, which builds its own binary.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "sunset-bin")
	if err != nil {
		panic(err)
	}
	sunsetBin, loadgenBin = filepath.Join(dir, "sunset"), filepath.Join(dir, "loadgen")
	for bin, pkg := range map[string]string{sunsetBin: "../cmd/sunset", loadgenBin: "./loadgen"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			panic("building " + pkg + ": " + err.Error())
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// process is a running `sunset serve`.
type process struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	exited chan error
	logged *messageLog
	// logDone is closed once every line the process wrote is read.
	logDone chan struct{}
}

// messageLog records the messages of the process's JSON log lines, so that a
// test waits on what the server says it did rather than on time.
type messageLog struct {
	mu    sync.Mutex
	count map[string]int
	// lastCommit is the last of "commit started" and "commit finished",
	// which the server logs at debug level around each badger commit.
	lastCommit string
	changed    chan struct{}
}

func newMessageLog() *messageLog {
	return &messageLog{count: map[string]int{}, changed: make(chan struct{})}
}

func (m *messageLog) add(msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count[msg]++
	if msg == "commit started" || msg == "commit finished" {
		m.lastCommit = msg
	}
	close(m.changed)
	m.changed = make(chan struct{})
}

// waitLogged waits until the process logs msg, failing if it exits first.
func (p *process) waitLogged(t *testing.T, msg string, within time.Duration) {
	t.Helper()
	p.waitCount(t, msg, 1, within)
}

// waitCount waits until the process has logged msg n times, failing if it
// exits first. It checks at every line, so that a crash test can kill the
// process while the commit it saw start is still running.
func (p *process) waitCount(t *testing.T, msg string, n int, within time.Duration) {
	t.Helper()
	require.NoError(t, p.await(within, 0, func() bool {
		p.logged.mu.Lock()
		defer p.logged.mu.Unlock()
		return p.logged.count[msg] >= n
	}), "waiting for %q %d times", msg, n)
}

// await returns once cond holds, checking it again after the process logs
// a line; with --log-level debug that includes "commit finished" after
// each commit. Checks are at least gap apart: a burst of lines then makes
// one check, not one each, so that a heavy check does not load the very
// process it waits on. It returns an error, with what the process logged,
// if the process exits first or within passes.
func (p *process) await(within, gap time.Duration, cond func() bool) error {
	timeout := time.After(within)
	for {
		p.logged.mu.Lock()
		changed := p.logged.changed
		p.logged.mu.Unlock()
		if cond() {
			return nil
		}
		pause := time.After(gap)
		select {
		case <-changed:
		case err := <-p.exited:
			return fmt.Errorf("sunset exited (%w):\n%s", err, p.stderr)
		case <-timeout:
			return fmt.Errorf("not within %s:\n%s", within, p.stderr)
		}
		select {
		case <-pause:
		case <-timeout:
			return fmt.Errorf("not within %s:\n%s", within, p.stderr)
		}
	}
}

// lockedBuffer collects the process's stderr while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startBinary runs sunset serve on dataDir and a random loopback port, and
// waits until it is ready.
func startBinary(t *testing.T, dataDir string, args ...string) *process {
	t.Helper()
	return startBinaryEnv(t, nil, dataDir, args...)
}

// startBinaryEnv is startBinary with env added to the environment.
func startBinaryEnv(t *testing.T, env []string, dataDir string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(sunsetBin, append([]string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan error, 1), logged: newMessageLog(), logDone: make(chan struct{})}
	go func() { p.exited <- cmd.Wait(); _ = pw.Close() }()
	listen := make(chan string, 1)
	go func() {
		defer close(p.logDone)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.stderr.Write(append(sc.Bytes(), '\n'))
			var line struct{ Message, Listen string }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			p.logged.add(line.Message)
			if line.Message == "sunset is serving" {
				listen <- line.Listen
			}
		}
	}()
	select {
	case addr := <-listen:
		p.url = "http://" + addr
	case err := <-p.exited:
		<-p.logDone
		t.Fatalf("sunset exited before serving: %v\n%s", err, p.stderr)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("sunset did not start within 30s:\n%s", p.stderr)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	return p
}

// batch is 100 deprecated requests to an API of its own, so that after a
// crash each batch's API shows whether the batch was committed.
func batch(i int, now time.Time) []byte {
	var items []string
	for j := 0; j < 100; j++ {
		items = append(items, fmt.Sprintf(`{"level":"Metadata","auditID":"b%d-%d","stage":"ResponseComplete","verb":"get","user":{"username":"u%d"},"userAgent":"crash/1.0","objectRef":{"resource":"widgets","apiGroup":"g%d.example","apiVersion":"v1beta1"},"requestReceivedTimestamp":%q,"annotations":{"k8s.io/deprecated":"true"}}`,
			i, j, j%3, i, now.Format(time.RFC3339Nano)))
	}
	return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items, ",") + `]}`)
}

// counts maps API name to requestCount as served now.
func counts(t *testing.T, url string) map[string]int64 {
	t.Helper()
	resp, err := http.Get(url + "/apis/sunset.dev/v1/apirequestcounts")
	require.NoError(t, err)
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct{ RequestCount int64 }
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	out := map[string]int64{}
	for _, it := range list.Items {
		out[it.Metadata.Name] = it.Status.RequestCount
	}
	return out
}

func post(url string, body []byte) (int, error) {
	resp, err := http.Post(url+"/audit/webhook/node-1", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func apiName(i int) string { return fmt.Sprintf("widgets.v1beta1.g%d.example", i) }

// sendConcurrently posts batches 0..n-1, their requests received at now,
// from 4 clients and calls onAck after each 200; it returns which batches
// were acknowledged. A retry sends the same now, as kube-apiserver re-sends
// the same events.
func sendConcurrently(url string, now time.Time, n int, onAck func(acked int64)) []bool {
	acked := make([]bool, n)
	var next, total atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				code, err := post(url, batch(i, now))
				if err != nil {
					return // the server is gone
				}
				if code == http.StatusOK {
					acked[i] = true
					onAck(total.Add(1))
				}
			}
		}()
	}
	wg.Wait()
	return acked
}

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

type apiObject struct {
	Status struct {
		RequestCount int64
		Window       struct {
			ByUser []struct {
				UserName     string `json:"username"`
				RequestCount int64
			}
		}
	}
}

func httpGetJSON(url string) (apiObject, error) {
	var obj apiObject
	resp, err := http.Get(url)
	if err != nil {
		return obj, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return obj, fmt.Errorf("status %d", resp.StatusCode)
	}
	return obj, json.NewDecoder(resp.Body).Decode(&obj)
}
