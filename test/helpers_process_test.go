// The harness every test of this package shares is in the helpers_*_test.go
// files: the binaries built once by TestMain, a running sunset process and
// what it logs (this file); webhook batches, Kafka events and load
// (helpers_send_test.go); the counts and metrics read back
// (helpers_read_test.go); and the deploy files rendered by kustomize
// (helpers_render_test.go). The checks that several subjects apply to
// rendered manifests are in the manifest_*_test.go files; each other file
// holds one subject's tests and what only they use.

package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/lockedbuf"
)

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
