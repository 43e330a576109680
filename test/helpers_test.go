// The harness every test of this package shares: the binaries built once
// by TestMain, a running sunset process and what it logs, webhook batches,
// Kafka events and load, the counts and metrics read back, and the deploy
// files rendered by kustomize. The checks that several subjects apply to
// rendered manifests are in manifest_checks_test.go; each other file holds
// one subject's tests and what only they use.

package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/internal/testutil/lockedbuf"
)

// rendered is one kustomization's output.
type rendered struct {
	dir  string
	raw  []map[string]any
	sts  appsv1.StatefulSet
	cm   corev1.ConfigMap
	svc  corev1.Service
	np   networkingv1.NetworkPolicy
	sa   corev1.ServiceAccount
	ns   corev1.Namespace
	smon serviceMonitor
}

type serviceMonitor struct {
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port            string `json:"port"`
			Path            string `json:"path"`
			Scheme          string `json:"scheme"`
			BearerTokenFile string `json:"bearerTokenFile"`
			TLSConfig       *struct {
				ServerName string `json:"serverName"`
				CA         struct {
					Secret *corev1.SecretKeySelector `json:"secret"`
				} `json:"ca"`
			} `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

func kubectl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is not on PATH: the kustomize tests render deploy/kubernetes with `kubectl kustomize` (install kubectl)")
	}
	return p
}

// kustomizations finds every kustomization.yaml under deploy/, as paths
// relative to deploy/.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	require.NoError(t, filepath.WalkDir("../deploy", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "kustomization.yaml" {
			rel, _ := filepath.Rel("../deploy", filepath.Dir(path))
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return err
	}))
	sort.Strings(dirs)
	return dirs
}

// render runs `kubectl kustomize` on deploy/<dir> and decodes every object,
// strictly: a field Kubernetes does not know fails the test.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	return decodeRendered(t, dir, kustomize(t, filepath.Join("../deploy", dir)))
}

// kustomize runs `kubectl kustomize` on path.
func kustomize(t *testing.T, path string) []byte {
	t.Helper()
	out, err := exec.Command(kubectl(t), "kustomize", path).CombinedOutput()
	require.NoError(t, err, "kubectl kustomize %s:\n%s", path, out)
	return out
}

// decodeRendered decodes a stream of YAML documents (kustomize's or
// Helm's output), strictly for the kinds the tests read.
func decodeRendered(t *testing.T, dir string, out []byte) *rendered {
	t.Helper()
	r := &rendered{dir: dir}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &obj))
		r.raw = append(r.raw, obj)
		kind, _ := obj["kind"].(string)
		strict := map[string]any{
			"StatefulSet": &r.sts, "ConfigMap": &r.cm, "Service": &r.svc,
			"NetworkPolicy": &r.np, "ServiceAccount": &r.sa, "Namespace": &r.ns,
		}
		into := strict[kind]
		if isScanner(obj) {
			// The cluster scan's own objects (its ServiceAccount,
			// NetworkPolicy, ConfigMap) are not Sunset's: the scan tests
			// read them from raw.
			into = nil
		}
		if kind == "ServiceMonitor" {
			// serviceMonitor holds only the fields the tests read: not strict.
			require.NoError(t, yaml.Unmarshal(doc, &r.smon))
		}
		if into != nil {
			require.NoError(t, yaml.UnmarshalStrict(doc, into), "%s: %s", dir, kind)
		}
	}
	return r
}

// isScanner reports whether obj belongs to the cluster scan's own workload
// (deploy/kubernetes/overlays/scan, the chart's scan.enabled).
func isScanner(obj map[string]any) bool {
	meta, _ := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	return labels["app.kubernetes.io/component"] == "cluster-scan"
}

// serveFlags are the flags `sunset serve --help` of the built binary lists.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(sunsetBin, "serve", "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	require.True(t, flags["listen"] && flags["data-dir"] && flags["config"], "parsed %v from:\n%s", flags, out)
	return flags
}

// requireRealFlags checks that every --flag is one `sunset serve` has, given
// as --name=value, and returns the values by name.
func requireRealFlags(t *testing.T, flags map[string]bool, args []string) map[string]string {
	t.Helper()
	values := map[string]string{}
	for _, a := range args {
		require.True(t, strings.HasPrefix(a, "--"), "argument %q is not a flag", a)
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		require.True(t, ok, "flag %q: write --name=value", a)
		require.True(t, flags[name], "--%s is not a flag of `sunset serve`", name)
		require.NotContains(t, values, name, "--%s given twice", name)
		values[name] = value
	}
	return values
}

func listenPort(t *testing.T, listen string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(listen)
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return int32(n)
}

// containerPort resolves a probe or Service port, by name or number.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) corev1.ContainerPort {
	t.Helper()
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp
		}
	}
	t.Fatalf("port %s is not a port of container %s", p.String(), c.Name)
	return corev1.ContainerPort{}
}

// sunsetConfig is the config file the ConfigMap carries.
func sunsetConfig(t *testing.T, r *rendered) map[string]any {
	t.Helper()
	require.Contains(t, r.cm.Data, "config.yaml")
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.cm.Data["config.yaml"]), &cfg))
	return cfg
}

func ptrTo[T any](v T) *T { return &v }

// sunsetBin is the binary under test; loadgenBin sends it audit events
// through kube-apiserver's webhook client. Neither has the race detector,
// whatever the tests run with.
var sunsetBin, loadgenBin string

func TestMain(m *testing.M) {
	if os.Getenv(inNetns) != "" {
		// The copy of a test in its own network namespace (ownNetwork:
		// TestQuickStart, TestDocsRunnableBlocksRun) runs make demo, which
		// builds its own binary.
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
	stderr *lockedbuf.Buffer
	exited chan error
	logged *messageLog
	// logDone is closed once every line the process wrote is read.
	logDone chan struct{}
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
	p := &process{cmd: cmd, stderr: &lockedbuf.Buffer{}, exited: make(chan error, 1), logged: newMessageLog(), logDone: make(chan struct{})}
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

// loadSummary is what loadgen prints.
type loadSummary struct {
	Sent, Acked, Failed int64
	BodyBytes           int
}

// loadgen starts loadgen with args; finish closes its stdin and returns
// its summary.
func loadgen(t *testing.T, args ...string) (finish func() loadSummary) {
	t.Helper()
	cmd := exec.Command(loadgenBin, args...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return func() loadSummary {
		t.Helper()
		require.NoError(t, stdin.Close())
		require.NoError(t, cmd.Wait())
		var s loadSummary
		require.NoError(t, json.Unmarshal([]byte(stdout.String()), &s), stdout.String())
		return s
	}
}

// metricsText is the server's /metrics.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// scrape returns the samples of the server's /metrics whose names start
// with prefix.
func scrape(t *testing.T, url, prefix string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(metricsText(t, url), "\n") {
		if strings.HasPrefix(line, prefix) {
			name, v, _ := strings.Cut(line, " ")
			var err error
			out[name], err = strconv.ParseFloat(v, 64)
			require.NoError(t, err)
		}
	}
	return out
}

// kafkaEvent is one audit event: deprecated ones hit endpoints.v1, the
// rest pods.v1.
func kafkaEvent(id string, user int, deprecated bool, at time.Time) []byte {
	resource, ann := "pods", `"authorization.k8s.io/decision":"allow"`
	if deprecated {
		resource, ann = "endpoints", `"k8s.io/deprecated":"true"`
	}
	return []byte(fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":%q,"stage":"ResponseComplete","verb":"list","user":{"username":"user-%d"},"userAgent":"client/1.0","objectRef":{"resource":%q,"apiVersion":"v1"},"responseStatus":{"code":200},"requestReceivedTimestamp":%q,"annotations":{%s}}`,
		id, user, resource, at.Format(time.RFC3339Nano), ann))
}

// userCounts reads endpoints.v1's requests per user over the last day.
func userCounts(t *testing.T, url string) map[string]int64 {
	t.Helper()
	resp, err := httpGetJSON(url + "/apis/sunset.dev/v1/apirequestcounts/endpoints.v1?since=24h&users=100")
	if err != nil {
		return map[string]int64{}
	}
	out := map[string]int64{}
	for _, u := range resp.Status.Window.ByUser {
		out[u.UserName] = u.RequestCount
	}
	return out
}
