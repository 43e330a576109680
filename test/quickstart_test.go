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

// inNetns marks the copy of TestQuickStart that runs in a network namespace
// of its own. (Not SUNSET_*: sunset serve refuses variables it does not
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
// as "# " lines.
func parseSteps(t *testing.T, block string) []quickStep {
	t.Helper()
	var steps []quickStep
	continued := false
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		switch {
		case continued:
			steps[len(steps)-1].command += "\n" + line
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "#"):
			require.NotEmpty(t, steps, "output before any command: %q", line)
			out := strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ")
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, out)
		default:
			steps = append(steps, quickStep{command: line})
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
	for _, tool := range []string{"bash", "make", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's quick start uses %s, which is not installed: apt-get install %s (.ci/run does)", tool, tool)
		}
	}
	if os.Getenv(inNetns) == "" {
		if ns := networkNamespace(); ns != nil {
			args := append(ns, "sh", "-c", `ip link set lo up && exec "$@"`, "sh", os.Args[0], "-test.run=^TestQuickStart$", "-test.count=1", "-test.v")
			cmd := exec.Command("unshare", args...)
			cmd.Env = append(os.Environ(), inNetns+"=1")
			out, err := cmd.CombinedOutput()
			t.Logf("in a network namespace of its own (unshare %s):\n%s", strings.Join(ns, " "), out)
			require.NoError(t, err)
			require.Contains(t, string(out), "--- PASS: TestQuickStart")
			return
		}
	}
	if ln, err := net.Listen("tcp", ":8080"); err != nil {
		t.Fatalf("the quick start serves on port 8080, which is in use here (%v), and this machine cannot give the test a network namespace of its own (unshare --net): stop what listens on 8080", err)
	} else {
		_ = ln.Close()
	}

	blocks := readQuickStart(t)
	require.Len(t, blocks, 2, "the quick start is `make demo`, then commands to run beside it")
	require.Equal(t, []quickStep{{command: "make demo"}}, blocks[0])
	require.GreaterOrEqual(t, len(blocks[1]), 3)
	for _, s := range blocks[1] {
		require.NotEmpty(t, s.want, "the README shows no output for %q", s.command)
	}

	// The README's numbers are those of one hour: when the clock passed a
	// full hour during the run, the counts of the current hour may differ,
	// and once more is enough.
	for attempt := 1; ; attempt++ {
		started := time.Now().UTC().Truncate(time.Hour)
		diffs := runQuickStart(t, blocks[0][0], blocks[1])
		if len(diffs) == 0 {
			return
		}
		if attempt == 1 && time.Now().UTC().Truncate(time.Hour) != started {
			t.Logf("the hour changed during the run; running the quick start again:\n%s", strings.Join(diffs, "\n"))
			continue
		}
		t.Fatalf("the README's quick start says otherwise than the program:\n%s", strings.Join(diffs, "\n"))
	}
}

// runQuickStart runs serve (make demo) until the steps have run, and
// returns how their output differs from the README's.
func runQuickStart(t *testing.T, serve quickStep, steps []quickStep) []string {
	t.Helper()
	// A demo directory of the test's own (the Makefile's DEMO_DIR), so
	// that a demo the developer runs in the checkout is left alone.
	env := append(os.Environ(), "DEMO_DIR="+t.TempDir())
	demo := exec.Command("bash", "-c", serve.command)
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
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return output.String()
	}
	stopped := false
	stop := func() {
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
	defer stop()
	select {
	case <-serving:
	case err := <-exited:
		stopped = true
		t.Fatalf("%s exited before serving: %v\n%s", serve.command, err, logged())
	case <-time.After(10 * time.Minute):
		t.Fatalf("%s did not serve within 10 minutes (it builds bin/sunset first):\n%s", serve.command, logged())
	}
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
