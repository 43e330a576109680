package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// outputLines collects what a process writes to one stream, line by line,
// and wakes waiters at each.
type outputLines struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

func newOutputLines() *outputLines { return &outputLines{changed: make(chan struct{})} }

// read collects r's lines until it ends, then closes done.
func (o *outputLines) read(r io.Reader, done chan<- struct{}) {
	defer close(done)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		o.mu.Lock()
		o.lines = append(o.lines, sc.Text())
		close(o.changed)
		o.changed = make(chan struct{})
		o.mu.Unlock()
	}
}

// snapshot is the lines so far, and a channel closed at the next one.
func (o *outputLines) snapshot() ([]string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.lines), o.changed
}

// logLine is the part of a line of Sunset's JSON log that says where it
// came from.
type logLine struct {
	Level, Message, Library string
}

// A server whose libraries all log, at debug: k8s.io/apiserver while its
// delegated authentication is built (klog), client-go as it fails to
// watch the authentication ConfigMap of a kube-apiserver that answers
// 404 to everything, gRPC as the GKE source dials a Pub/Sub emulator that
// is not there. Every line of its stdout and stderr, to its exit, is a
// JSON object with Sunset's fields, the libraries' named by "library":
// a pipeline that parses JSON drops none of them.
func TestEveryLogLineIsSunsetJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	apiserver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(apiserver.Close)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: reader
  user: {token: not-a-real-token}
contexts:
- name: fake
  context: {cluster: fake, user: reader}
current-context: fake
`, apiserver.URL), 0o600))
	config := filepath.Join(dir, "sunset.yaml")
	require.NoError(t, os.WriteFile(config, []byte(`ingest:
  gke:
    - cluster: prod
      subscription: projects/my-project/subscriptions/audit
`), 0o600))
	// A port that refuses connections: one that was just free.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := l.Addr().String()
	require.NoError(t, l.Close())

	cmd := exec.Command(sunsetBin, "serve", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0",
		"--log-format", "json", "--log-level", "debug", "--config", config,
		"--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig)
	cmd.Env = append(os.Environ(), "PUBSUB_EMULATOR_HOST="+refusing)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	outLines, errLines := newOutputLines(), newOutputLines()
	outDone, errDone := make(chan struct{}), make(chan struct{})
	go outLines.read(stdout, outDone)
	go errLines.read(stderr, errDone)

	// Each library has logged once these have.
	want := []logLine{
		{Level: "info", Library: "klog", Message: "Adding GroupVersion sunset.dev v1 to ResourceManager"},
		{Level: "error", Library: "klog", Message: "Failed to watch"},
		{Level: "info", Message: "sunset is serving"},
	}
	timeout := time.After(60 * time.Second)
	for seen := map[logLine]bool{}; ; {
		lines, changed := errLines.snapshot()
		grpc := false
		for _, s := range lines {
			var l logLine
			if json.Unmarshal([]byte(s), &l) == nil {
				seen[l] = true
				grpc = grpc || l.Library == "grpc"
			}
		}
		if grpc && !slices.ContainsFunc(want, func(l logLine) bool { return !seen[l] }) {
			break
		}
		select {
		case <-changed:
		case <-errDone:
			t.Fatalf("sunset exited:\n%s", joinLines(lines))
		case <-timeout:
			t.Fatalf("not every library logged within 60s:\n%s", joinLines(lines))
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	<-outDone
	<-errDone
	require.NoError(t, cmd.Wait())

	for stream, o := range map[string]*outputLines{"stdout": outLines, "stderr": errLines} {
		lines, _ := o.snapshot()
		for _, s := range lines {
			var fields map[string]any
			require.NoError(t, json.Unmarshal([]byte(s), &fields), "%s: a line that is not JSON: %s", stream, s)
			require.Contains(t, []any{"trace", "debug", "info", "warn", "error"}, fields["level"], "%s: %s", stream, s)
			require.IsType(t, "", fields["message"], "%s: %s", stream, s)
			stamp, ok := fields["time"].(string)
			require.True(t, ok, "%s: no time: %s", stream, s)
			_, err := time.Parse(time.RFC3339, stamp)
			require.NoError(t, err, "%s: %s", stream, s)
		}
	}
	lines, _ := errLines.snapshot()
	require.JSONEq(t, `{"level":"info","message":"sunset stopped"}`, stripTime(t, lines[len(lines)-1]), "the last line is Sunset's own")
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

// stripTime is line without its time field.
func stripTime(t *testing.T, line string) string {
	t.Helper()
	var fields map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &fields))
	delete(fields, "time")
	b, err := json.Marshal(fields)
	require.NoError(t, err)
	return string(b)
}
