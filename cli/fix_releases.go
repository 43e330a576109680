package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/fix/helmrelease"
)

// FixReleasesRequest is `sunset fix releases`.
type FixReleasesRequest struct {
	// Release is the one release to fix; empty fixes every release of the
	// namespace (or of every namespace).
	Release string
	// Namespace is -n; empty is the kubeconfig context's namespace.
	Namespace     string
	AllNamespaces bool
	// Kubeconfig and Context choose the cluster, as kubectl's flags do.
	Kubeconfig, Context string
	// HelmNamespace and HelmKubeContext are the environment's
	// HELM_NAMESPACE and HELM_KUBECONTEXT, which stand for -n and
	// --context when those are not given, as they do for helm.
	HelmNamespace, HelmKubeContext string
	// TargetVersion is the release being upgraded to: what it removes
	// moves too, beside what the cluster does not serve.
	TargetVersion string
	// Driver is HELM_DRIVER: where Helm keeps the records, secret (the
	// default) or configmap.
	Driver string
	DryRun bool
	// Records reads and writes Helm's records: package helmstore's, which
	// the command passes in, so that this package does not link the Helm
	// SDK.
	Records helmrelease.Records
	// BeforeWrite, if set, runs before each write (step backup, revision
	// or supersede) of a release ("namespace/name"); a test holds the fix
	// there to interrupt it at a known point.
	BeforeWrite func(ctx context.Context, release, step, object string) error

	target catalog.Release
}

// Validate checks the flags.
func (r *FixReleasesRequest) Validate() error {
	var errs []error
	if r.AllNamespaces && r.Namespace != "" {
		errs = append(errs, errors.New("give -n NAMESPACE or --all-namespaces, not both"))
	}
	if r.TargetVersion != "" {
		rel, err := parseTarget(r.TargetVersion)
		if err != nil {
			errs = append(errs, err)
		}
		r.target = rel
	}
	return errors.Join(errs...)
}

// Run fixes each release in turn, printing what changed. A release that
// cannot be fixed is reported and the others are still fixed; any such
// release makes the command exit 1.
func (r *FixReleasesRequest) Run(ctx context.Context, out Output) error {
	cfg, namespace, err := r.clientConfig()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return r.run(ctx, out, kube, namespace)
}

// clientConfig loads the kubeconfig at the context chosen, and names the
// namespace to fix ("" for every namespace): flags first, then Helm's
// environment, then the kubeconfig context's, as helm chooses.
func (r *FixReleasesRequest) clientConfig() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = r.Kubeconfig
	kubeContext := cmp.Or(r.Context, r.HelmKubeContext)
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading the kubeconfig: %w", err)
	}
	if r.AllNamespaces {
		return cfg, "", nil
	}
	if namespace := cmp.Or(r.Namespace, r.HelmNamespace); namespace != "" {
		return cfg, namespace, nil
	}
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("loading the kubeconfig's namespace: %w", err)
	}
	return cfg, namespace, nil
}

// run fixes the releases of namespace ("" for every namespace).
func (r *FixReleasesRequest) run(ctx context.Context, out Output, kube kubernetes.Interface, namespace string) error {
	cat, err := catalog.New(nil)
	if err != nil {
		return err
	}
	f := &helmrelease.Fixer{Kube: kube, Records: r.Records, Catalog: cat, Table: convert.New(cat), Target: r.target, Driver: r.Driver, DryRun: r.DryRun}
	if r.BeforeWrite != nil {
		f.BeforeWrite = func(ctx context.Context, rel helmrelease.Release, step helmrelease.Step, object string) error {
			return r.BeforeWrite(ctx, rel.String(), string(step), object)
		}
	}
	releases, err := f.Find(ctx, namespace, r.Release)
	if err != nil {
		return err
	}
	if len(releases) == 0 {
		fmt.Fprintln(out.Out, Terminal(r.noneFound(namespace)))
		return nil
	}
	failed := 0
	for _, rel := range releases {
		if err := ctx.Err(); err != nil {
			// Interrupted: each release fixed so far is, and the rest
			// are as they were.
			return err
		}
		res, err := f.Fix(ctx, rel)
		if err != nil {
			failed++
			var refused *helmrelease.RefusedError
			if errors.As(err, &refused) {
				for _, o := range refused.Objects {
					fmt.Fprintln(out.Err, "Error:", Terminal(fmt.Sprintf("%s: revision %d: %s: %s", rel, refused.Revision, o.Template, o)))
				}
			}
			fmt.Fprintln(out.Err, "Error:", Terminal(err.Error()))
			continue
		}
		for _, c := range res.Changes {
			fmt.Fprintln(out.Out, Terminal(rel.String()+": "+c.String()))
		}
		fmt.Fprintln(out.Out, Terminal(r.summary(res)))
	}
	if failed > 0 {
		err := fmt.Errorf("%d of %d Helm releases were not fixed", failed, len(releases))
		fmt.Fprintln(out.Err, "Error:", err)
		return &ExitCodeError{Code: ExitError, Err: err}
	}
	return nil
}

func (r *FixReleasesRequest) noneFound(namespace string) string {
	what := "no Helm release"
	if r.Release != "" {
		what += " named " + r.Release
	}
	if namespace == "" {
		return what + " in any namespace"
	}
	return what + " in namespace " + namespace
}

// summary is the line after a release's changes: what was (or would be)
// written.
func (r *FixReleasesRequest) summary(res helmrelease.Result) string {
	rel := res.Release
	superseded := revisionList(res.Superseded)
	if res.UpToDate {
		line := fmt.Sprintf("%s: revision %d uses no API %s, nothing to do", rel, res.Revision, r.moving())
		switch {
		case len(res.Superseded) > 0 && r.DryRun:
			line += fmt.Sprintf("; would mark %s superseded, left deployed by an interrupted fix (dry run: nothing written)", superseded)
		case len(res.Superseded) > 0:
			line += fmt.Sprintf("; %s marked superseded, left deployed by an interrupted fix", superseded)
		}
		return line
	}
	if r.DryRun {
		return fmt.Sprintf("%s: would back up revision %d as %s %s, write revision %d with the replacements and mark %s superseded (dry run: nothing written)",
			rel, res.Revision, rel.Store, res.Backup, res.NewRevision, superseded)
	}
	return fmt.Sprintf("%s: revision %d backed up as %s %s; revision %d deployed with the replacements; %s superseded",
		rel, res.Revision, rel.Store, res.Backup, res.NewRevision, superseded)
}

// moving says which APIs the fix moves.
func (r *FixReleasesRequest) moving() string {
	if r.target.IsZero() {
		return "the cluster does not serve"
	}
	return "removed by " + r.target.String() + " or not served by the cluster"
}

func revisionList(revisions []int) string {
	s := make([]string, len(revisions))
	for i, v := range revisions {
		s[i] = strconv.Itoa(v)
	}
	if len(s) == 1 {
		return "revision " + s[0]
	}
	return "revisions " + strings.Join(s, ", ")
}
