// Package helmchart renders Helm charts for a scan, with the Helm SDK, as
// `helm template` does. It is the one package of Sunset's that imports
// the SDK, which is most of what a binary that renders charts links: the
// commands that scan charts (`sunset scan`, `sunset check --scan`) hand a
// Renderer to package scan, and nothing else links it.
//
// A chart's templates are programs: `{{ repeat 1000000000 "x" }}` takes a
// gigabyte before its output can be refused, and nested ranges can run
// for ever. So the binary renders each chart in a child process of its
// own (Child), bounded in memory and time, and a chart over the bounds is
// an error of that chart alone.
package helmchart

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/kube-sunset/sunset/scan"
)

// Renderer renders charts with the values `helm template` takes. They
// apply to every chart a scan renders.
type Renderer struct {
	// ValueFiles, Set, SetString and SetJSON are helm's --values, --set,
	// --set-string and --set-json.
	ValueFiles, Set, SetString, SetJSON []string
	// KubeVersion is the release .Capabilities.KubeVersion says; charts
	// that pick an apiVersion by cluster version pick the one they would
	// after the upgrade. Empty means the target release.
	KubeVersion string
	// ReleaseName and Namespace fill .Release.
	ReleaseName, Namespace string
	// Child, when set, renders each chart in a child process bounded in
	// memory and time. Nil renders in this process, where nothing bounds
	// what a template allocates or how long it runs: only for charts
	// that are trusted, such as a test's.
	Child *Child
}

// Render renders the chart at path for a scan, with caps as what the
// chart sees of the cluster.
func (o Renderer) Render(path string, caps scan.Capabilities) (scan.Rendered, error) {
	if o.Child != nil {
		return o.Child.render(o, path, caps)
	}
	return o.render(path, caps)
}

// render renders the chart at path in this process.
func (o Renderer) render(path string, caps scan.Capabilities) (scan.Rendered, error) {
	var out scan.Rendered
	ch, skipped, err := load(path)
	out.Skipped = skipped
	if err != nil {
		return out, fmt.Errorf("loading the chart: %w", err)
	}
	acc, err := chart.NewAccessor(ch)
	if err != nil {
		return out, err
	}
	if deps := acc.MetaDependencies(); len(deps) > 0 {
		if err := action.CheckDependencies(ch, deps); err != nil {
			return out, fmt.Errorf("%w (run `helm dependency build %s` first)", err, path)
		}
	}
	vals, err := (&values.Options{ValueFiles: o.ValueFiles, Values: o.Set, StringValues: o.SetString, JSONValues: o.SetJSON}).
		MergeValues(getter.Providers{})
	if err != nil {
		return out, fmt.Errorf("reading values: %w", err)
	}
	cfg := action.NewConfiguration()
	// Helm logs through slog's default logger otherwise; its warnings
	// (deprecated chart, CRDs in a dry run) are not the scan's findings.
	cfg.SetLogger(slog.DiscardHandler)
	install := action.NewInstall(cfg)
	// A client-only dry run (helm template) replaces the capabilities
	// with Helm's defaults, every version client-go knows, whatever the
	// target serves; a server dry run takes cfg.Capabilities as they are.
	// Its server is a client that builds nothing and reaches nothing, and
	// with no RESTClientGetter templates get no lookup, as in helm
	// template.
	install.DryRunStrategy = action.DryRunServer
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName, install.Namespace = o.ReleaseName, o.Namespace
	if install.ReleaseName == "" {
		install.ReleaseName = "release-name"
	}
	if install.Namespace == "" {
		install.Namespace = "default"
	}
	releases := driver.NewMemory()
	releases.SetNamespace(install.Namespace)
	cfg.Releases = storage.Init(releases)
	capabilities := chartcommon.DefaultCapabilities.Copy()
	kube := o.KubeVersion
	if kube == "" {
		kube = caps.KubeVersion
	}
	if kube != "" {
		v, err := chartcommon.ParseKubeVersion("v" + strings.TrimPrefix(kube, "v") + ".0")
		if err != nil {
			return out, fmt.Errorf("kube version %q: %w", kube, err)
		}
		capabilities.KubeVersion = *v
	}
	if len(caps.APIVersions) > 0 {
		capabilities.APIVersions = slices.Clone(caps.APIVersions)
	}
	cfg.Capabilities = capabilities
	rel, err := install.RunWithContext(context.Background(), ch, vals)
	if err != nil {
		return out, fmt.Errorf("rendering: %w", err)
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return out, fmt.Errorf("rendering: unexpected release type %T", rel)
	}
	out.Manifests = scan.SplitManifest(r.Manifest)
	for _, h := range r.Hooks {
		out.Manifests = append(out.Manifests, scan.Manifest{Template: h.Path, Text: h.Manifest})
	}
	return out, nil
}
