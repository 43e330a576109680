package main

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kube-sunset/sunset/cli"
	"github.com/kube-sunset/sunset/cli/connect"
)

// readCommand is a command that reads counts: it declares the source flags,
// and runs req against the source they choose. Its long help is
// help/<helpName>.txt. name, if set, receives the command's one optional
// argument; without it the command takes none.
func readCommand(env console, use, short, helpName string, req cli.Request, name *string) *cobra.Command {
	src := connect.Flags{Plugin: env.plugin, Getenv: env.getenv}
	cmd := withHelp(&cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}, helpName)
	if name != nil {
		cmd.Args = cobra.MaximumNArgs(1)
	}
	src.AddReadFlags(cmd.Flags())
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if len(args) == 1 {
			*name = args[0]
		}
		return src.Run(req, env.output())
	}
	return cmd
}

func addFilters(fs *pflag.FlagSet, f *cli.Filters) {
	fs.StringVar(&f.Cluster, "cluster", "", "only this cluster's apiservers")
	fs.DurationVar(&f.Since, "since", 24*time.Hour, "how far back to look, in whole hours (up to the retention)")
	fs.BoolVar(&f.ExcludeSystem, "exclude-system", true, "leave out system identities (system-users): they go away with the upgrade")
}

func newReportCommand(env console) *cobra.Command {
	var req cli.ListRequest
	cmd := readCommand(env, "report [NAME]",
		"Show which deprecated APIs are called, how often and by whom", "report", &req, &req.Name)
	fs := cmd.Flags()
	addFilters(fs, &req.Filters)
	fs.StringVarP(&req.Output, "output", "o", "table", "table, wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:.path,...")
	fs.BoolVar(&req.NoHeaders, "no-headers", false, "leave out the header line of table, wide and custom-columns")
	fs.StringVar(&req.RemovedIn, "removed-in", "", "only APIs removed in this release, e.g. 1.37")
	fs.StringVar(&req.RemovedBefore, "removed-before", "", "only APIs removed before this release, e.g. 1.38")
	fs.StringVar(&req.State, "state", "", "deprecated (still served) or removed (clients already get 404)")
	fs.StringVar(&req.User, "user", "", "only APIs this username called")
	cmd.AddCommand(newReportWebhooksCommand(env))
	return cmd
}

func newReportWebhooksCommand(env console) *cobra.Command {
	var req cli.WebhooksRequest
	cmd := readCommand(env, "webhooks [CONFIGURATION.WEBHOOK]",
		"Show which admission webhooks slow down, fail open on or touch which resources", "report-webhooks", &req, &req.Name)
	fs := cmd.Flags()
	fs.StringVar(&req.Cluster, "cluster", "", "only this cluster")
	fs.DurationVar(&req.Since, "since", 24*time.Hour, "how far back to look, in whole hours (up to the retention)")
	fs.StringVar(&req.Class, "class", "", "only resources of this class: critical, security or virtual")
	fs.StringVarP(&req.Output, "output", "o", "table", "table, wide, json or yaml")
	return cmd
}

func newCheckCommand(env console) *cobra.Command {
	var req cli.CheckRequest
	cmd := readCommand(env, "check --target-version 1.NN",
		"Upgrade gate: fail if APIs removed by the target release are still called", "check", &req, nil)
	fs := cmd.Flags()
	addFilters(fs, &req.Filters)
	fs.StringVar(&req.TargetVersion, "target-version", "", "the Kubernetes release to upgrade to, e.g. 1.37")
	fs.BoolVar(&req.WarningsAsErrors, "warnings-as-errors", false, "exit 2 when deprecated (not yet removed) APIs were requested")
	fs.StringVarP(&req.Output, "output", "o", "text", "text or json")
	fs.DurationVar(&req.CleanFor, "clean-for", 0, "treat a caller silent for this long (whole hours, e.g. 6h) as stopped: it no longer fails the check")
	fs.StringVar(&req.From, "from", "", "the release upgraded from, e.g. 1.34: also name each release up to --target-version that breaks")
	fs.StringArrayVar(&req.Scan.Paths, "scan", nil, "also scan these manifests, kustomizations or charts (as sunset scan), for one verdict (repeatable)")
	scanCluster := fs.Bool("scan-cluster", true, "with --kubeconfig or --context, also scan that cluster's Helm releases, CRDs and APIServices")
	addScanFlags(fs, &req.Scan)
	readTraffic := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		req.Scan.Stdin = env.stdin
		if *scanCluster {
			// The cluster whose traffic is read through kube-apiserver is
			// the one to scan.
			req.Scan.Kubeconfig, req.Scan.Context = fs.Lookup("kubeconfig").Value.String(), fs.Lookup("context").Value.String()
		}
		return readTraffic(cmd, args)
	}
	return cmd
}

func newStoreCommand(env console) *cobra.Command {
	var dataDir string
	var quick bool
	verify := withHelp(&cobra.Command{
		Use:   "verify",
		Short: "Check a data directory for damage, without changing it",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return cli.Verify(dataDir, quick, env.output()) },
	}, "store-verify")
	verify.Flags().StringVar(&dataDir, "data-dir", "./sunset-data", "the data directory to check")
	verify.Flags().BoolVar(&quick, "quick", false, "read only the tables' indexes and end blocks, as serve does at startup")
	store := &cobra.Command{Use: "store", Short: "Look after a data directory", Args: cobra.NoArgs}
	store.AddCommand(verify)
	return store
}
