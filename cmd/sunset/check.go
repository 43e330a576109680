package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/report"
	"github.com/kube-sunset/sunset/source"
)

func newCheckCommand(env cli) *cobra.Command {
	var (
		src              source.Flags
		lf               listFlags
		target, output   string
		warningsAsErrors bool
	)
	cmd := &cobra.Command{
		Use:   "check --target-version 1.NN",
		Short: "Upgrade gate: fail if APIs removed by the target release are still called",
		Long: `Check reads what was requested in the window (--since, default 24h) and
decides whether upgrading to --target-version breaks clients. It prints one
line per API in the Kubernetes warning format, followed by who called it.

Exit codes:
  0  no API removed at or before the target version was requested
  1  the check could not run (usage error, server unreachable, bad data)
  2  only deprecated, not yet removed, APIs were requested, and
     --warnings-as-errors was given
  3  APIs removed at or before the target version were requested`,
		Example: `  sunset check --target-version 1.37
  sunset check --target-version 1.37 --warnings-as-errors --since 168h -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target == "" {
				return fmt.Errorf("--target-version is required, e.g. --target-version 1.37")
			}
			rel, err := catalog.ParseRelease(target)
			if err != nil {
				return fmt.Errorf("--target-version: %w", err)
			}
			if err := lf.validate(); err != nil {
				return err
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q is not one of text, json", output)
			}
			s, closeSource, err := src.Open(env.now)
			if err != nil {
				return err
			}
			defer closeSource()
			q := lf.query()
			list, err := s.List(q)
			if err != nil {
				return err
			}
			res := report.Check(list, report.CheckOptions{Target: rel, Since: lf.since, ExcludeSystem: lf.excludeSystem, WarningsAsErrors: warningsAsErrors})
			if len(res.Findings) == 0 {
				// Safe, but say so when the window misses what the store holds.
				if msg, hinted := source.NoRequests(s, q, list, report.Options{ExcludeSystem: lf.excludeSystem, Since: lf.since}); hinted {
					fmt.Fprintln(cmd.ErrOrStderr(), msg)
				}
			}
			if output == "json" {
				err = report.WriteObject(cmd.OutOrStdout(), res, report.FormatJSON)
			} else {
				err = res.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if res.ExitCode != report.ExitSafe {
				return &exitError{code: res.ExitCode, err: fmt.Errorf("check failed with exit code %d", res.ExitCode)}
			}
			return nil
		},
	}
	src.AddFlags(cmd.Flags())
	lf.add(cmd)
	cmd.Flags().StringVar(&target, "target-version", "", "the Kubernetes release to upgrade to, e.g. 1.37")
	cmd.Flags().BoolVar(&warningsAsErrors, "warnings-as-errors", false, "exit 2 when deprecated (not yet removed) APIs were requested")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}
