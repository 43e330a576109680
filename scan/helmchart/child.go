package helmchart

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/report"
)

// ChildArg is the argument that makes a binary a chart's renderer: a main
// that finds it as its only argument calls ServeChild, before anything
// else, and exits with the code it returns. `sunset __render-chart` is the
// one there is; it is no command of the CLI.
const ChildArg = "__render-chart"

// DefaultMemory and DefaultTimeout are a Child's bounds when it sets none.
const (
	DefaultMemory  = 512 << 20
	DefaultTimeout = 60 * time.Second
)

// ErrTimedOut is a chart whose rendering ran past its Child's Timeout.
var ErrTimedOut = errors.New("timed out")

// Child renders each chart in a process of its own: this program run
// again with ChildArg, fed the chart's path and the values on its
// standard input, answering with what the chart renders on its standard
// output. What a template allocates is the child's, and the child's is
// bounded: past Memory it exits, and its address space cannot grow more
// than Memory plus 256 MiB, so one allocation of gigabytes fails at once.
// Past Timeout it is killed. Either way the chart is an error of its own
// and this process holds none of what the templates built.
//
// Renders run one at a time, as a scan renders its charts, so a scan's
// peak memory is this process's plus one child's.
type Child struct {
	// Command is the renderer's program and its arguments. Empty is this
	// program (os.Executable) with ChildArg, whose main must then hand
	// ChildArg to ServeChild.
	Command []string
	// Memory bounds, in bytes, what the child's Go runtime holds (its
	// heap, free or in use, and its stacks). Zero is DefaultMemory.
	Memory int64
	// Timeout bounds one render's wall-clock time. Zero is DefaultTimeout.
	Timeout time.Duration

	// exited, when set, is given each child's state once it has exited:
	// tests read its peak resident memory there.
	exited func(*os.ProcessState)
}

// childEnv is set in a child's environment: a renderer started by a
// renderer (a program whose main does not serve ChildArg, run again)
// refuses to render rather than start another.
const childEnv = "SUNSET_CHART_RENDERER"

// magic opens the request and the response, so that a program that is not
// a renderer is not taken for one.
const magic = "sunset-render-chart/1\n"

// maxResponse bounds what is read of a child's answer: what a chart
// renders (scan.MaxChartSize, which the child enforces) and room for the
// files it skipped.
const maxResponse = scan.MaxChartSize + 16<<20

// request is what a child is asked to render, and within which bounds.
type request struct {
	Renderer     Renderer
	Path         string
	Capabilities scan.Capabilities
	Memory       int64
	Timeout      time.Duration
}

// response is what a chart rendered to, or why it did not.
type response struct {
	Manifests []scan.Manifest
	Skipped   []report.Skipped
	// Err is the render's error, empty if none; TooLarge is set when it
	// was over one of the scan's bounds.
	Err      string
	TooLarge *scan.TooLargeError
}

// childError is a child's error, with its message as the child wrote it.
type childError struct {
	msg      string
	tooLarge *scan.TooLargeError
}

func (e *childError) Error() string { return e.msg }

func (e *childError) Unwrap() error {
	if e.tooLarge == nil {
		return nil
	}
	return e.tooLarge
}

func (c *Child) limits() (memory int64, timeout time.Duration) {
	memory, timeout = c.Memory, c.Timeout
	if memory <= 0 {
		memory = DefaultMemory
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return memory, timeout
}

// render renders the chart at path with o in a child process.
func (c *Child) render(o Renderer, path string, caps scan.Capabilities) (scan.Rendered, error) {
	if os.Getenv(childEnv) != "" {
		return scan.Rendered{}, errors.New("rendering: a chart's renderer may not start another")
	}
	memory, timeout := c.limits()
	command := c.Command
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return scan.Rendered{}, fmt.Errorf("rendering: finding this program to render with: %w", err)
		}
		command = []string{exe, ChildArg}
	}
	o.Child = nil
	in := bytes.NewBufferString(magic)
	if err := gob.NewEncoder(in).Encode(request{Renderer: o, Path: path, Capabilities: caps, Memory: memory, Timeout: timeout}); err != nil {
		return scan.Rendered{}, fmt.Errorf("rendering: encoding the request: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	stdout, stderr := &capped{max: maxResponse}, &capped{max: 4 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, stdout, stderr
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if c.exited != nil && cmd.ProcessState != nil {
		c.exited(cmd.ProcessState)
	}
	if err != nil {
		return scan.Rendered{}, childFailed(ctx, err, stderr.buf.Bytes(), memory, timeout)
	}
	if stdout.over {
		return scan.Rendered{}, &scan.TooLargeError{What: "what the chart renders", Limit: scan.MaxChartSize}
	}
	rest, ok := bytes.CutPrefix(stdout.buf.Bytes(), []byte(magic))
	if !ok {
		return scan.Rendered{}, fmt.Errorf("rendering: %s answered with something else than a chart: does its main serve %s?", command[0], ChildArg)
	}
	var resp response
	if err := gob.NewDecoder(bytes.NewReader(rest)).Decode(&resp); err != nil {
		return scan.Rendered{}, fmt.Errorf("rendering: reading the renderer's answer: %w", err)
	}
	out := scan.Rendered{Manifests: resp.Manifests, Skipped: resp.Skipped}
	if resp.Err != "" {
		return out, &childError{msg: resp.Err, tooLarge: resp.TooLarge}
	}
	return out, nil
}

// childFailed is why a child ended without an answer: killed at the
// timeout, over its memory, or failed otherwise.
func childFailed(ctx context.Context, err error, stderr []byte, memory int64, timeout time.Duration) error {
	var exit *exec.ExitError
	overMemory := &scan.TooLargeError{What: "the memory its templates take", Limit: memory}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("rendering: %w: its templates ran for more than %s", ErrTimedOut, seconds(timeout))
	case !errors.As(err, &exit):
		return fmt.Errorf("rendering: starting the renderer: %w", err)
	case exit.ExitCode() == exitOverMemory || exit.ExitCode() == 2 && outOfMemory(stderr):
		return fmt.Errorf("rendering: %w", overMemory)
	case exit.ExitCode() == exitTimedOut:
		return fmt.Errorf("rendering: %w: its templates ran for more than %s", ErrTimedOut, seconds(timeout))
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(stderr)), "\n")
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	if line == "" {
		return fmt.Errorf("rendering: the renderer ended with %w", exit)
	}
	return fmt.Errorf("rendering: the renderer ended with %w: %s", exit, line)
}

// outOfMemory reports whether a Go program's last words (the start of its
// standard error) say it ran out of memory: an allocation its address
// space could not hold, or a stack past its bound.
func outOfMemory(stderr []byte) bool {
	return bytes.Contains(stderr, []byte("fatal error: out of memory")) ||
		bytes.Contains(stderr, []byte("fatal error: stack overflow"))
}

func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return d.String()
}

// capped keeps the first max bytes written to it and drops the rest, so
// that a child is never blocked writing, nor this process filled.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if len(p) > room {
		c.over = true
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.buf.Write(p)
}
