package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/report"
	"github.com/kube-sunset/sunset/verdict"
)

// ScanOptions are the flags of a scan, alone (`sunset scan`) or as part of
// `sunset check --scan`.
type ScanOptions struct {
	Paths []string
	// Charts renders the charts among Paths. The command passes package
	// helmchart's Renderer, so that this package, which every command
	// links, does not link the Helm SDK.
	Charts scan.ChartRenderer
	// CurrentVersion is the cluster's release, for a scan without a
	// cluster; a cluster scan reads it from the cluster.
	CurrentVersion string
	// Kubeconfig and Context choose a cluster to scan, as kubectl's flags
	// do; with neither, no cluster is scanned.
	Kubeconfig, Context string
	// Catalog and FieldRules are the configured extras (a server config's
	// catalog.extra and fieldRules).
	Catalog    []catalog.Entry
	FieldRules []fieldrule.Rule
	Stdin      io.Reader
	// Progress, if set, is told what is being read.
	Progress func(what, path string)
	// AllowRemote lets kustomizations fetch remote resources and bases
	// (--allow-remote); see scan.Files.
	AllowRemote bool
	// KustomizeRoot lets kustomizations read under this directory, which
	// holds every path scanned (--kustomize-root); see scan.Files.
	KustomizeRoot string
	// APIVersions are added to what charts see as
	// .Capabilities.APIVersions (--api-versions), beside the target's
	// built-in APIs and, with a cluster, its CRDs and aggregated APIs.
	APIVersions []string

	current catalog.Release
}

func (o *ScanOptions) validate() error {
	for _, v := range o.APIVersions {
		if v == "" || strings.ContainsFunc(v, unicode.IsSpace) || strings.Count(v, "/") > 2 {
			return fmt.Errorf("--api-versions %q is not an API version such as example.com/v1 or example.com/v1/Widget", v)
		}
	}
	if o.CurrentVersion == "" {
		return nil
	}
	rel, err := catalog.ParseRelease(o.CurrentVersion)
	if err != nil {
		return fmt.Errorf("--current-version: %w", err)
	}
	o.current = rel
	return nil
}

// wanted reports whether there is anything to scan.
func (o *ScanOptions) wanted() bool { return len(o.Paths) > 0 || o.cluster() }

func (o *ScanOptions) cluster() bool { return o.Kubeconfig != "" || o.Context != "" }

// kubeConfig loads a kubeconfig as kubectl does: the file given, else
// KUBECONFIG, else ~/.kube/config; the context given, else the current one.
func kubeConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// run scans the paths and then the cluster, judging against target.
func (o *ScanOptions) run(ctx context.Context, target catalog.Release) (report.Result, error) {
	cat, err := catalog.New(o.Catalog)
	if err != nil {
		return report.Result{}, err
	}
	rules, err := fieldrule.New(o.FieldRules)
	if err != nil {
		return report.Result{}, err
	}
	j := scan.Judge{Catalog: cat, Fields: rules, Target: target, Current: o.current, Conversions: convert.New(cat)}
	res := report.Result{TargetVersion: target.String()}
	var cfg *rest.Config
	apiVersions := o.APIVersions
	if o.cluster() {
		if cfg, err = kubeConfig(o.Kubeconfig, o.Context); err != nil {
			return res, err
		}
		if len(o.Paths) > 0 {
			// Charts see the cluster's CRDs and aggregated APIs, as
			// helm template --validate would.
			discovered, err := scan.DiscoverAPIVersions(cfg, cat)
			if err != nil {
				return res, err
			}
			apiVersions = append(slices.Clip(apiVersions), discovered...)
		}
		// Objects of third-party APIs are judged by the cluster's own
		// CRDs, the files' and the Helm releases' alike.
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return res, err
		}
		if j.CRDs, err = scan.ReadCRDVersions(ctx, dyn); err != nil {
			// Without them the scan still judges by the catalog;
			// the cluster scan reports the gap.
			j.CRDs = nil
		}
	}
	if len(o.Paths) > 0 {
		res.Merge(scan.Files{Judge: j, Stdin: o.Stdin, Charts: o.Charts, Progress: o.Progress, AllowRemote: o.AllowRemote, KustomizeRoot: o.KustomizeRoot, APIVersions: apiVersions}.Scan(ctx, o.Paths))
	}
	if o.cluster() {
		c, err := scan.NewCluster(cfg, j)
		if err != nil {
			return res, err
		}
		c.Progress = o.Progress
		cres, err := c.Scan(ctx)
		if err != nil {
			return res, err
		}
		res.Merge(cres)
	}
	return res, nil
}

// ScanRequest is `sunset scan`.
type ScanRequest struct {
	ScanOptions
	TargetVersion    string
	Output           string
	WarningsAsErrors bool
	Version          string
	// Fix rewrites the files of Paths to the replacement APIs instead of
	// reporting them (--fix); DryRun prints the rewrite as a diff and
	// writes nothing (--dry-run).
	Fix, DryRun bool

	target catalog.Release
}

// Validate checks the flags.
func (s *ScanRequest) Validate() error {
	errs := []error{s.validate()}
	if s.TargetVersion == "" {
		errs = append(errs, errors.New("--target-version is required, e.g. --target-version 1.37"))
	} else if rel, err := parseTarget(s.TargetVersion); err != nil {
		errs = append(errs, err)
	} else {
		s.target = rel
	}
	if !slices.Contains(report.Formats, s.Output) {
		errs = append(errs, fmt.Errorf("-o %q is not one of %s", s.Output, strings.Join(report.Formats, ", ")))
	}
	switch {
	case s.DryRun && !s.Fix:
		errs = append(errs, errors.New("--dry-run goes with --fix: sunset scan --fix --dry-run prints the rewrite and writes nothing"))
	case s.Fix && s.cluster():
		errs = append(errs, errors.New("--fix rewrites files, not a cluster: drop --kubeconfig and --context"))
	case s.Fix && slices.Contains(s.Paths, "-"):
		errs = append(errs, errors.New("--fix rewrites files in place, and standard input is not one: give the files or directories"))
	case s.Fix && len(s.Paths) == 0:
		errs = append(errs, errors.New("--fix rewrites files: give the directories or files to fix"))
	case s.Fix && s.Output != "table":
		errs = append(errs, fmt.Errorf("--fix prints what it changes as text; -o %s is for the scan's findings", s.Output))
	case !s.wanted():
		errs = append(errs, errors.New("give paths to scan (a directory, files, or - for standard input), or --kubeconfig/--context to scan a cluster"))
	}
	return errors.Join(errs...)
}

// Run scans and prints the findings; gaps and errors go to stderr too,
// since -o sarif or junit may go to a file. A verdict other than safe is
// an ExitCodeError.
func (s *ScanRequest) Run(ctx context.Context, out Output) error {
	if s.Fix {
		return s.fix(ctx, out)
	}
	res, err := s.run(ctx, s.target)
	if err != nil {
		return err
	}
	if err := res.Write(out.Out, s.Output, s.Version, Terminal); err != nil {
		return err
	}
	writeScanProblems(out.Err, res)
	if s.Output == "table" || s.Output == "wide" {
		fmt.Fprintln(out.Out, Terminal(res.Verdict(s.WarningsAsErrors)))
	}
	if code := exitCode(verdict.ScanExitCode(res, s.WarningsAsErrors)); code != ExitSafe {
		return &ExitCodeError{Code: code, Err: fmt.Errorf("scan failed with exit code %d", code)}
	}
	return nil
}

// writeScanProblems says what was not scanned and what could not be read.
func writeScanProblems(w io.Writer, res report.Result) {
	for _, n := range res.NotScanned {
		fmt.Fprintln(w, "Warning:", Terminal(n.String()))
	}
	for _, e := range res.Errors {
		fmt.Fprintln(w, "Error:", Terminal(e.String()))
	}
}

// parseTarget reads --target-version, which must be a release the catalog
// can speak for: one it has heard of. A target far past the newest release
// the catalog knows would read as "safe" only because nothing is known to
// be removed there yet.
func parseTarget(s string) (catalog.Release, error) {
	rel, err := catalog.ParseRelease(s)
	if err != nil {
		return rel, fmt.Errorf("--target-version: %w", err)
	}
	horizon, err := catalog.Horizon()
	if err != nil {
		return rel, err
	}
	if horizon.Less(rel) {
		return rel, fmt.Errorf("--target-version %s is past every release this Sunset's catalog knows (the last is %s): what %s removes is unknown, so the verdict would be a guess. Give a release up to %s, or a newer Sunset", rel, horizon, rel, horizon)
	}
	return rel, nil
}
