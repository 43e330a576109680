// Command sunset finds who still calls deprecated Kubernetes APIs, from the
// kube-apiserver audit stream. See README.md for every command and key.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
)

// Set at build time with -ldflags "-X main.version=... -X main.revision=...".
var (
	version  = "dev"
	revision = ""
)

func main() {
	os.Exit(run())
}

// run only owns the process: signals and the exit code. Everything else is in
// the commands, which take a context, so tests can drive them.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd := newRootCommand(cli{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, now: time.Now,
		isTerminal: isatty.IsTerminal(os.Stderr.Fd())})
	if err := cmd.ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	return 0
}

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
