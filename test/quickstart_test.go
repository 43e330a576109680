package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// inNetns marks the copy of a test that runs in a network namespace of its
// own (ownNetwork). (Not SUNSET_*: sunset serve refuses variables it does not
// know.)
const inNetns = "QUICKSTART_IN_NETNS"

// quickStep is one command of the README's quick start and the lines the
// README shows under it.
type quickStep struct {
	command string
	want    []string
}

// readQuickStart reads the shell blocks of the README's "Quick start"
// section.
func readQuickStart(t *testing.T) [][]quickStep {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(raw), "\n## Quick start\n")
	require.True(t, ok, "README.md has no Quick start section")
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks [][]quickStep
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, parseSteps(t, m[1]))
	}
	return blocks
}

// parseSteps reads a shell block of a document: commands (a line ending in
// | or \ goes on), each followed by the output the document shows for it
// as "# " lines right under it. A "# " line at the start of the block or
// after a blank line is a comment on the command that follows, as a reader
// would take it, not output.
func parseSteps(t *testing.T, block string) []quickStep {
	t.Helper()
	var steps []quickStep
	continued, underCommand := false, false
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		switch {
		case continued:
			steps[len(steps)-1].command += "\n" + line
		case strings.TrimSpace(line) == "":
			underCommand = false
		case strings.HasPrefix(line, "#") && !underCommand:
			// A comment.
		case strings.HasPrefix(line, "#"):
			out := strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ")
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, out)
		default:
			steps = append(steps, quickStep{command: line})
			underCommand = true
		}
		trimmed := strings.TrimSpace(line)
		continued = !strings.HasPrefix(trimmed, "#") && (strings.HasSuffix(trimmed, "|") || strings.HasSuffix(trimmed, "\\"))
	}
	return steps
}

// networkNamespace returns the unshare arguments that give a process a
// network namespace of its own, or nil where that is not possible.
func networkNamespace() []string {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil
	}
	for _, args := range [][]string{{"--net"}, {"--net", "--map-root-user"}} {
		if exec.Command("unshare", append(args, "true")...).Run() == nil {
			return args
		}
	}
	return nil
}

// requireDemoTools fails the test when a tool that what runs beside make
// demo uses is missing.
func requireDemoTools(t *testing.T, what string) {
	t.Helper()
	for _, tool := range []string{"bash", "make", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s uses %s, which is not installed: apt-get install %s (.ci/run does)", what, tool, tool)
		}
	}
}

// ownNetwork runs the test named name again in a network namespace of its
// own, where the machine allows one, and reports whether it did: the
// caller then returns. make demo serves on port 8080, which nothing else
// on the machine (another make run, another checkout's tests) may hold
// there. Without a namespace, it fails the test when the port is in use.
func ownNetwork(t *testing.T, name string) bool {
	t.Helper()
	if os.Getenv(inNetns) == "" {
		if ns := networkNamespace(); ns != nil {
			args := append(ns, "sh", "-c", `ip link set lo up && exec "$@"`, "sh", os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
			cmd := exec.Command("unshare", args...)
			cmd.Env = append(os.Environ(), inNetns+"=1")
			out, err := cmd.CombinedOutput()
			t.Logf("in a network namespace of its own (unshare %s):\n%s", strings.Join(ns, " "), out)
			require.NoError(t, err)
			require.Contains(t, string(out), "--- PASS: "+name)
			return true
		}
	}
	if ln, err := net.Listen("tcp", ":8080"); err != nil {
		t.Fatalf("make demo serves on port 8080, which is in use here (%v), and this machine cannot give the test a network namespace of its own (unshare --net): stop what listens on 8080", err)
	} else {
		_ = ln.Close()
	}
	return false
}

// The README's quick start, run as written on today's date: `make demo`,
// then every command shown beside it, whose output must be what the README
// shows. So the first thing a new user reads cannot drift from what the
// program does.
//
// The quick start serves on port 8080. Where it can, the test runs in a
// network namespace of its own, so that nothing else on the machine (another
// `make run`, another checkout's tests) holds that port.
func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make demo")
	}
	requireDemoTools(t, "the README's quick start")
	if ownNetwork(t, "TestQuickStart") {
		return
	}

	blocks := readQuickStart(t)
	require.Len(t, blocks, 2, "the quick start is `make demo`, then commands to run beside it")
	require.Equal(t, []quickStep{{command: "make demo"}}, blocks[0])
	require.GreaterOrEqual(t, len(blocks[1]), 3)
	for _, s := range blocks[1] {
		require.NotEmpty(t, s.want, "the README shows no output for %q", s.command)
	}

	sameHour(t, "the README's quick start", func() []string { return runQuickStart(t, blocks[0][0], blocks[1]) })
}

// sameHour runs run, which returns how what a page shows differs from
// what the program printed, and fails the test when it differs. A page's
// numbers are those of one hour: when the clock passed a full hour during
// the run, the counts of the current hour may differ, and once more is
// enough.
func sameHour(t *testing.T, what string, run func() []string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		started := time.Now().UTC().Truncate(time.Hour)
		diffs := run()
		if len(diffs) == 0 {
			return
		}
		if attempt == 1 && time.Now().UTC().Truncate(time.Hour) != started {
			t.Logf("the hour changed during the run; running %s again:\n%s", what, strings.Join(diffs, "\n"))
			continue
		}
		t.Fatalf("%s says otherwise than the program:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// startDemo runs serve (make demo) with env until it serves, and returns
// what it printed so far and how to stop it; the test stops it at the end
// if the caller did not.
func startDemo(t *testing.T, serve string, env []string) (logged func() string, stop func()) {
	t.Helper()
	demo := exec.Command("bash", "-c", serve)
	demo.Dir, demo.Env = "..", env
	// make and the sunset it starts are stopped together.
	demo.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	demo.Stdout, demo.Stderr = pw, pw
	require.NoError(t, demo.Start())
	exited := make(chan error, 1)
	go func() { exited <- demo.Wait(); _ = pw.Close() }()
	var (
		mu     sync.Mutex
		output strings.Builder
	)
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			output.WriteString(sc.Text() + "\n")
			mu.Unlock()
			var line struct{ Message string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "sunset is serving" {
				once.Do(func() { close(serving) })
			}
		}
	}()
	logged = func() string {
		mu.Lock()
		defer mu.Unlock()
		return output.String()
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-demo.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-demo.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	t.Cleanup(stop)
	select {
	case <-serving:
	case err := <-exited:
		stopped = true
		t.Fatalf("%s exited before serving: %v\n%s", serve, err, logged())
	case <-time.After(10 * time.Minute):
		t.Fatalf("%s did not serve within 10 minutes (it builds bin/sunset first):\n%s", serve, logged())
	}
	return logged, stop
}

// runQuickStart runs serve (make demo) until the steps have run, and
// returns how their output differs from the README's.
func runQuickStart(t *testing.T, serve quickStep, steps []quickStep) []string {
	t.Helper()
	// A demo directory of the test's own (the Makefile's DEMO_DIR), so
	// that a demo the developer runs in the checkout is left alone.
	env := append(os.Environ(), "DEMO_DIR="+t.TempDir())
	logged, stop := startDemo(t, serve.command, env)
	// What make demo printed before serving: the shift and the replays.
	require.Regexp(t, `(?m)^Shifted every timestamp \d+h later, so the newest event \(2026-11-21 19:20:50 UTC\) falls in the current hour\.\n`+
		`Replayed 1393 events from 1 input in [0-9.]+[µm]?s: 66 counted, 0 duplicates,`, logged())

	var diffs []string
	for _, s := range steps {
		cmd := exec.Command("bash", "-c", s.command)
		cmd.Dir, cmd.Env = "..", env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", s.command, out)
		got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		for i := range got {
			got[i] = strings.TrimRight(got[i], " ")
		}
		if strings.Join(got, "\n") != strings.Join(s.want, "\n") {
			diffs = append(diffs, fmt.Sprintf("$ %s\nREADME shows:\n%s\nit printed:\n%s\n", s.command, strings.Join(s.want, "\n"), strings.Join(got, "\n")))
		}
	}
	stop()
	return diffs
}
