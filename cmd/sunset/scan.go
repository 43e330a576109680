package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kube-sunset/sunset/cli"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/scan/helmchart"
)

func newScanCommand(env console) *cobra.Command {
	req := cli.ScanRequest{Version: version}
	var configFile string
	cmd := withHelp(&cobra.Command{Use: "scan --target-version 1.NN [PATH|-]...",
		Short: "Find deprecated and removed APIs in manifests, kustomizations, charts and a cluster's Helm releases"}, "scan")
	fs := cmd.Flags()
	fs.StringVar(&req.TargetVersion, "target-version", "", "the Kubernetes release to upgrade to, e.g. 1.37")
	fs.StringVar(&req.CurrentVersion, "current-version", "", "the cluster's release now, to mark APIs it already stopped serving (read from the cluster with --kubeconfig)")
	fs.StringVarP(&req.Output, "output", "o", "table", "table, wide, json, yaml, markdown, sarif or junit")
	fs.BoolVar(&req.WarningsAsErrors, "warnings-as-errors", true, "exit 2 when deprecated (not yet removed) APIs are used; =false to exit 0")
	fs.StringVar(&configFile, "config", "", "a server config file, for its catalog.extra and field-rules")
	fs.BoolVar(&req.Fix, "fix", false, "rewrite the files given to the replacement APIs, in place (manifests, a kustomization's files, literal apiVersion lines of chart templates), and list what is left as it was; exits 1 if anything is left")
	fs.BoolVar(&req.DryRun, "dry-run", false, "with --fix: print the rewrite as a unified diff and write nothing")
	addScanFlags(fs, &req.ScanOptions)
	fs.StringVar(&req.Kubeconfig, "kubeconfig", "", "scan the cluster this kubeconfig reaches (Helm releases, CRDs, APIServices)")
	fs.StringVar(&req.Context, "context", "", "the kubeconfig context to scan; alone, the kubeconfig comes from KUBECONFIG or ~/.kube/config")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		req.Paths, req.Stdin = args, env.stdin
		if err := loadExtras(configFile, &req.ScanOptions); err != nil {
			return err
		}
		if env.isTerminal {
			// Paths are whatever the scanned tree holds: escaped as
			// in the tables.
			req.Progress = func(what, path string) { fmt.Fprintf(env.stderr, "scanning %s %s\n", what, cli.Terminal(path)) }
		}
		if err := req.Validate(); err != nil {
			return err
		}
		return req.Run(cmd.Context(), env.output())
	}
	return cmd
}

// addScanFlags declares how charts are rendered, for scan and check --scan,
// and gives the scan the Helm SDK's renderer: the binary links it here, so
// that package cli does not. Each chart renders in a child, bounded
// (renderchart.go).
func addScanFlags(fs *pflag.FlagSet, o *cli.ScanOptions) {
	charts := &helmchart.Renderer{Child: &helmchart.Child{}}
	o.Charts = charts
	fs.StringArrayVarP(&charts.ValueFiles, "values", "f", nil, "render charts with this values file, as helm template -f (repeatable)")
	fs.StringArrayVar(&charts.Set, "set", nil, "render charts with this value, as helm template --set key=value (repeatable)")
	fs.StringArrayVar(&charts.SetString, "set-string", nil, "as helm template --set-string key=value (repeatable)")
	fs.StringArrayVar(&charts.SetJSON, "set-json", nil, "as helm template --set-json key=json (repeatable)")
	fs.StringVar(&charts.KubeVersion, "kube-version", "", "the release charts see as .Capabilities.KubeVersion (default: the target version)")
	fs.StringArrayVar(&o.APIVersions, "api-versions", nil, "an API version charts see in .Capabilities.APIVersions beside the target's, e.g. example.com/v1 or example.com/v1/Widget, as helm template -a (repeatable)")
	fs.StringVar(&charts.ReleaseName, "release-name", "release-name", "the release name charts are rendered with")
	fs.StringVar(&o.KustomizeRoot, "kustomize-root", "", "a directory holding the paths scanned that kustomizations may read under too (a repository root, for an overlay whose base is at ../../base); off, they read only under the path given")
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "let kustomizations fetch their remote resources and bases (http(s) URLs, git repositories); off, such a kustomization is an error and nothing is fetched")
}

// loadExtras reads catalog.extra and field-rules from a server config file,
// so that a scan knows the same CRD lifecycles and field rules as the
// server.
func loadExtras(configFile string, o *cli.ScanOptions) error {
	if configFile == "" {
		return nil
	}
	cfg, err := config.Load(config.Flags(), configFile)
	if err != nil {
		return err
	}
	o.Catalog, o.FieldRules = cfg.Catalog.Extra, cfg.FieldRules
	return nil
}
