package scan

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// ChartOptions are the values charts are rendered with, as `helm template`
// takes them. They apply to every chart a scan renders.
type ChartOptions struct {
	// ValueFiles, Set, SetString and SetJSON are helm's --values, --set,
	// --set-string and --set-json.
	ValueFiles, Set, SetString, SetJSON []string
	// KubeVersion is the release .Capabilities.KubeVersion says; charts
	// that pick an apiVersion by cluster version pick the one they would
	// after the upgrade. Empty means the target release.
	KubeVersion string
	// ReleaseName and Namespace fill .Release.
	ReleaseName, Namespace string
}

// chart renders a chart directory or archive as `helm template` does,
// hooks included, and judges what it renders. A chart that cannot be
// loaded or rendered is an error: its objects are unknown, not safe.
func (s Files) chart(path string) Result {
	s.progress("chart", path)
	manifests, err := s.Chart.render(path, s.Judge.Target.String())
	if err != nil {
		return failed(path, err)
	}
	res := Result{Scanned: Scanned{Charts: 1}}
	for _, m := range manifests {
		objs, err := s.Judge.readObjects([]byte(m.text))
		if err != nil {
			res.Errors = append(res.Errors, InputError{Path: path, Err: fmt.Sprintf("%s rendered: %v", m.template, err)})
		}
		res.Scanned.Objects += len(objs)
		for _, o := range objs {
			res.Findings = append(res.Findings, s.Judge.Judge(o, Origin{Path: path, Template: m.template})...)
		}
	}
	return res
}

// manifest is the rendered output of one template.
type manifest struct{ template, text string }

func (o ChartOptions) render(path, target string) ([]manifest, error) {
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	acc, err := chart.NewAccessor(ch)
	if err != nil {
		return nil, err
	}
	if deps := acc.MetaDependencies(); len(deps) > 0 {
		if err := action.CheckDependencies(ch, deps); err != nil {
			return nil, fmt.Errorf("%w (run `helm dependency build %s` first)", err, path)
		}
	}
	vals, err := (&values.Options{ValueFiles: o.ValueFiles, Values: o.Set, StringValues: o.SetString, JSONValues: o.SetJSON}).
		MergeValues(getter.Providers{})
	if err != nil {
		return nil, fmt.Errorf("reading values: %w", err)
	}
	cfg := action.NewConfiguration()
	// Helm logs through slog's default logger otherwise; its warnings
	// (deprecated chart, CRDs in a dry run) are not the scan's findings.
	cfg.SetLogger(slog.DiscardHandler)
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName, install.Namespace = o.ReleaseName, o.Namespace
	if install.ReleaseName == "" {
		install.ReleaseName = "release-name"
	}
	if install.Namespace == "" {
		install.Namespace = "default"
	}
	kube := o.KubeVersion
	if kube == "" {
		kube = target
	}
	if kube != "" {
		if install.KubeVersion, err = chartcommon.ParseKubeVersion("v" + strings.TrimPrefix(kube, "v") + ".0"); err != nil {
			return nil, fmt.Errorf("kube version %q: %w", kube, err)
		}
	}
	rel, err := install.RunWithContext(context.Background(), ch, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("rendering: unexpected release type %T", rel)
	}
	out := splitManifest(r.Manifest)
	for _, h := range r.Hooks {
		out = append(out, manifest{template: h.Path, text: h.Manifest})
	}
	return out, nil
}

// splitManifest cuts a release's manifest into its templates' output. Helm
// writes each as "---\n# Source: <chart>/templates/<file>\n<yaml>".
func splitManifest(m string) []manifest {
	var out []manifest
	for _, part := range strings.Split("\n"+m, "\n---\n") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		header, body, _ := strings.Cut(part, "\n")
		template, ok := strings.CutPrefix(header, "# Source: ")
		if !ok {
			template, body = "", part
		}
		out = append(out, manifest{template: template, text: body})
	}
	return out
}
