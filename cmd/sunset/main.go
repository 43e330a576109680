// Command sunset finds who still calls deprecated Kubernetes APIs, from the
// kube-apiserver audit stream. docs/cli.md describes every command and
// docs/configuration.md every key.
//
// main only parses flags and calls packages: app serves, cli reads and
// prints, cli/replay imports, cli/connect opens where the read commands
// read.
//
// Installed or linked as kubectl-sunset, the binary is kubectl's plugin
// `kubectl sunset` (see plugin.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/cli"
)

func main() {
	if code, ok := renderChart(os.Args[1:]); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	plugin, args := pluginArgs(os.Args[0], os.Args[1:])
	code := run(ctx, console{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, now: time.Now,
		isTerminal: isatty.IsTerminal(os.Stderr.Fd()), plugin: plugin, getenv: os.Getenv,
		routeLibraryLogs: routeLibraryLogs}, args)
	stop()
	os.Exit(code)
}

// console is what commands take from the process, so tests can replace it.
type console struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	now            func() time.Time
	// isTerminal reports whether stderr is a terminal (for progress bars
	// and console logs).
	isTerminal bool
	// plugin is set when kubectl runs the binary as `kubectl sunset`:
	// help then says so, and the source flags mean what kubectl's do.
	plugin bool
	// getenv reads the environment the kubeconfig is found from; nil is
	// an empty one.
	getenv func(string) string
	// routeLibraryLogs, when set, sends the logs of libraries with
	// process-global loggers through serve's logger (see logs.go). Only
	// main sets it: tests that run serve in the process leave those
	// loggers alone.
	routeLibraryLogs func(zerolog.Logger)
}

func (env console) output() cli.Output {
	return cli.Output{Out: env.stdout, Err: env.stderr, Now: env.now}
}

// run runs the command args name and returns the process's exit code.
func run(ctx context.Context, env console, args []string) int {
	cmd := newRootCommand(env)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	var exit *cli.ExitCodeError
	switch {
	case err == nil:
		return cli.ExitSafe
	case errors.As(err, &exit):
		return exit.Code
	}
	fmt.Fprintln(env.stderr, "Error:", errorText(err))
	return cli.ExitError
}

// errorText is err's message for the terminal: a message can quote a file
// name, a path or a server's answer, so each of its lines is escaped as
// the tables' cells are; the lines of joined errors stay lines.
func errorText(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = cli.Terminal(l)
	}
	return strings.Join(lines, "\n")
}
