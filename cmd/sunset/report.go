package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/report"
	"github.com/kube-sunset/sunset/source"
)

// listFlags are the filters report and check share.
type listFlags struct {
	cluster, user string
	since         time.Duration
	excludeSystem bool
}

func (f *listFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.cluster, "cluster", "", "only this cluster's apiservers")
	cmd.Flags().DurationVar(&f.since, "since", 24*time.Hour, "how far back to look, in whole hours (up to the retention)")
	cmd.Flags().BoolVar(&f.excludeSystem, "exclude-system", true, "leave out system identities (system-users): they go away with the upgrade")
}

func (f *listFlags) validate() error {
	if f.since < time.Hour {
		return fmt.Errorf("--since %s is shorter than 1h; counts are hourly", f.since)
	}
	return nil
}

func (f *listFlags) query() api.Query {
	q := api.DefaultQuery()
	q.Cluster, q.User, q.Since = f.cluster, f.user, f.since
	// Enough users that the top non-system ones are known even when
	// system identities lead.
	q.Users = api.MaxUsersToReport
	return q
}

func newReportCommand(env cli) *cobra.Command {
	var (
		src                       source.Flags
		lf                        listFlags
		output, removedIn, before string
		noHeaders                 bool
		state                     string
	)
	cmd := &cobra.Command{
		Use:   "report [NAME]",
		Short: "Show which deprecated APIs are called, how often and by whom",
		Long: `Report lists the deprecated APIs requested in the window (--since, default
24h) with their removal release, request counts and top client, like
"kubectl get". Given an API name (resource.version.group, e.g.
cronjobs.v1beta1.batch or endpoints.v1) it shows that API's breakdown: per
node, per user with workload and verbs, and the last 24 hours hour by hour.

It reads a running server (--server, default ` + source.DefaultServer + `) or a data
directory directly (--data-dir, read-only).`,
		Example: `  sunset report
  sunset report -o wide --removed-before 1.37
  sunset report --user system:serviceaccount:ci:deployer --since 168h
  sunset report cronjobs.v1beta1.batch
  sunset report --data-dir /var/lib/sunset -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			printer, err := report.ObjectPrinter(output, noHeaders)
			if err != nil {
				return err
			}
			format := report.FormatJSON
			if printer == nil {
				if format, err = report.ParseFormat(output); err != nil {
					return err
				}
			}
			if err := lf.validate(); err != nil {
				return err
			}
			q := lf.query()
			var errs []error
			for flag, dst := range map[string]*catalog.Release{"--removed-in": &q.RemovedIn, "--removed-before": &q.RemovedBefore} {
				val := removedIn
				if flag == "--removed-before" {
					val = before
				}
				if val == "" {
					continue
				}
				if *dst, err = catalog.ParseRelease(val); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", flag, err))
				}
			}
			if state != "" && state != api.StateDeprecated && state != api.StateRemoved {
				errs = append(errs, fmt.Errorf("--state %q is not one of deprecated, removed", state))
			}
			q.State = state
			if err := errors.Join(errs...); err != nil {
				return err
			}
			s, closeSource, err := src.Open(env.now)
			if err != nil {
				return err
			}
			defer closeSource()
			o := report.Options{ExcludeSystem: lf.excludeSystem, Since: lf.since}
			out := cmd.OutOrStdout()
			if len(args) == 1 {
				obj, err := s.Get(args[0], q)
				if err != nil {
					if errors.Is(err, api.ErrNotFound) {
						return fmt.Errorf("no deprecated requests to %s were recorded (names look like cronjobs.v1beta1.batch; `sunset report` lists them)", args[0])
					}
					return err
				}
				if printer != nil {
					return report.PrintObject(out, printer, obj)
				}
				if format == report.FormatJSON || format == report.FormatYAML {
					return report.WriteObject(out, obj, format)
				}
				return report.Describe(out, obj, env.now(), o)
			}
			list, err := s.List(q)
			if err != nil {
				return err
			}
			rows := report.Rows(list, o)
			switch {
			case printer != nil || format == report.FormatJSON || format == report.FormatYAML:
				filtered := report.Kept(list, rows)
				if printer != nil {
					return report.PrintObject(out, printer, filtered)
				}
				return report.WriteObject(out, filtered, format)
			}
			if len(rows) == 0 {
				msg, _ := source.NoRequests(s, q, list, o)
				fmt.Fprintln(cmd.ErrOrStderr(), msg)
				return nil
			}
			o.NoHeaders = noHeaders
			return report.WriteTable(out, rows, o, format == report.FormatWide)
		},
	}
	src.AddFlags(cmd.Flags())
	lf.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:.path,...")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "leave out the header line of table, wide and custom-columns")
	cmd.Flags().StringVar(&removedIn, "removed-in", "", "only APIs removed in this release, e.g. 1.37")
	cmd.Flags().StringVar(&before, "removed-before", "", "only APIs removed before this release, e.g. 1.38")
	cmd.Flags().StringVar(&state, "state", "", "deprecated (still served) or removed (clients already get 404)")
	cmd.Flags().StringVar(&lf.user, "user", "", "only APIs this username called")
	cmd.AddCommand(newReportWebhooksCommand(env))
	return cmd
}
