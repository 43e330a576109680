package main

import (
	"embed"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/app"
)

// help holds each long command's help: its description, then its
// examples after a line "Examples:".
//
//go:embed help/*.txt
var help embed.FS

// withHelp sets cmd's long help and examples from help/name.txt.
func withHelp(cmd *cobra.Command, name string) *cobra.Command {
	b, err := help.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic(err) // Embedded at build time: a missing file is a bug the tests catch.
	}
	long, example, _ := strings.Cut(strings.TrimSuffix(string(b), "\n"), "\n\nExamples:\n")
	cmd.Long, cmd.Example = long, example
	return cmd
}

func newRootCommand(env console) *cobra.Command {
	root := &cobra.Command{
		Use:   "sunset",
		Short: "Find who still calls deprecated Kubernetes APIs, from the audit stream",
		Long: `Sunset reads the kube-apiserver audit stream, keeps exact hourly counts of
requests to deprecated APIs per API, apiserver, user, user agent and verb, and
serves them as APIRequestCount objects shaped like OpenShift's.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Flag help wraps at 100 columns: serve's keys carry a full sentence
	// or three each (their help tags, which docs/configuration.md shows
	// too).
	root.SetUsageTemplate(strings.NewReplacer(".LocalFlags.FlagUsages", ".LocalFlags.FlagUsagesWrapped 100",
		".InheritedFlags.FlagUsages", ".InheritedFlags.FlagUsagesWrapped 100").Replace(root.UsageTemplate()))
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	root.SetIn(env.stdin)
	info, ok := debug.ReadBuildInfo()
	build := app.NewBuildInfo(buildVersion(version, info, ok), revision)
	root.AddCommand(newServeCommand(env, build), newReportCommand(env), newCheckCommand(env), newScanCommand(env), newFixCommand(env), newPublishScanCommand(env), newReplayCommand(env), newStoreCommand(env),
		&cobra.Command{Use: "version", Short: "Print the version of sunset", Args: cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error { _, err := fmt.Fprintln(env.stdout, build); return err }})
	if env.plugin {
		presentAsKubectlPlugin(root)
	}
	return root
}
