package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/app"
)

// cli is what commands take from the process, so tests can replace it.
type cli struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	now            func() time.Time
	// isTerminal reports whether stderr is a terminal (for progress bars).
	isTerminal bool
}

func newRootCommand(env cli) *cobra.Command {
	root := &cobra.Command{
		Use:   "sunset",
		Short: "Find who still calls deprecated Kubernetes APIs, from the audit stream",
		Long: `Sunset reads the kube-apiserver audit stream, keeps exact hourly counts of
requests to deprecated APIs per API, apiserver, user, user agent and verb, and
serves them as APIRequestCount objects shaped like OpenShift's.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	root.SetIn(env.stdin)
	root.AddCommand(newServeCommand(), newReportCommand(env), newCheckCommand(env), newReplayCommand(env), newStoreCommand(env), newVersionCommand())
	return root
}

func buildInfo() app.BuildInfo {
	b := app.BuildInfo{Version: version, Revision: revision}
	if b.Revision == "" {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					b.Revision = s.Value
				}
			}
		}
	}
	return b
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of sunset",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := buildInfo()
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "sunset %s (revision %s, %s)\n", b.Version, b.Revision, runtime.Version())
			return err
		},
	}
}
