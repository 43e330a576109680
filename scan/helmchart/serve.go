package helmchart

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/kube-sunset/sunset/scan"
)

// A child's exit codes other than 0 (answered) and 1 (the request could
// not be read, or the answer not written). A Go program that cannot
// allocate exits with 2 and says so on standard error.
const (
	exitOverMemory = 86
	exitTimedOut   = 87
)

// addressSlack is how far past Memory a child's address space may grow:
// room for the thread stacks and the runtime's own mappings that its
// memory classes do not count.
const addressSlack = 256 << 20

// watchEvery is how often a child reads its runtime's memory.
const watchEvery = 2 * time.Millisecond

// maxRequest bounds a request: a path and the values of the command line.
const maxRequest = 16 << 20

// ServeChild renders the chart a Child asks for on stdin and writes the
// answer on stdout, within the request's bounds: it exits the process
// with its own code once its Go runtime holds more than the request's
// memory, or once the request's timeout is past (its parent kills it
// first, unless it is gone). It returns the process's exit code, 1 if
// the request cannot be read, and writes why on stderr.
func ServeChild(stdin io.Reader, stdout, stderr io.Writer) int {
	req, err := readRequest(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "reading the request:", err)
		return 1
	}
	bound(req.Memory)
	exit := func(code int) func() { return func() { os.Exit(code) } }
	go watchMemory(uint64(req.Memory), watchEvery, exit(exitOverMemory))
	time.AfterFunc(req.Timeout+time.Second, exit(exitTimedOut))

	var resp response
	rendered, err := req.Renderer.render(req.Path, req.Capabilities)
	resp.Manifests, resp.Skipped = rendered.Manifests, rendered.Skipped
	total := 0
	for _, m := range rendered.Manifests {
		total += len(m.Text)
	}
	if err == nil && total > scan.MaxChartSize {
		err = &scan.TooLargeError{What: "what the chart renders", Limit: scan.MaxChartSize}
	}
	if err != nil {
		resp.Manifests, resp.Err = nil, err.Error()
		errors.As(err, &resp.TooLarge)
	}
	w := bufio.NewWriter(stdout)
	if _, err := io.WriteString(w, magic); err != nil {
		fmt.Fprintln(stderr, "writing the answer:", err)
		return 1
	}
	if err := gob.NewEncoder(w).Encode(resp); err != nil {
		fmt.Fprintln(stderr, "writing the answer:", err)
		return 1
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(stderr, "writing the answer:", err)
		return 1
	}
	return 0
}

func readRequest(stdin io.Reader) (request, error) {
	var req request
	r := bufio.NewReader(io.LimitReader(stdin, maxRequest))
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(r, head); err != nil || string(head) != magic {
		return req, errors.New("not a chart to render: " + ChildArg + " is for sunset itself")
	}
	if err := gob.NewDecoder(r).Decode(&req); err != nil {
		return req, err
	}
	if req.Memory <= 0 || req.Timeout <= 0 {
		return req, errors.New("no bounds given")
	}
	return req, nil
}

// bound sets this process's bounds for rendering within memory bytes: the
// garbage collector works harder from three quarters of it on, a
// goroutine's stack stops at a quarter of it, and the address space
// cannot grow more than memory plus addressSlack from here, so that one
// huge allocation fails before the watchdog could see it (but for the
// race detector's, which needs more).
func bound(memory int64) {
	debug.SetMemoryLimit(memory / 4 * 3)
	debug.SetMaxStack(int(memory / 4))
	if !raceDetector {
		limitAddressSpace(uint64(memory) + addressSlack)
	}
}

// watchMemory calls over once the Go runtime holds more than limit bytes
// (what it has mapped, less what it gave back to the system: what the Go
// memory limit counts too), looking every interval.
func watchMemory(limit uint64, every time.Duration, over func()) {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		metrics.Read(samples)
		if samples[0].Value.Uint64()-samples[1].Value.Uint64() > limit {
			over()
			return
		}
	}
}
