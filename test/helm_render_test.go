package test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

const (
	chartDir = "../deploy/helm/sunset"
	// The release the comparisons install: its name and namespace are the
	// ones the kustomizations write.
	helmRelease   = "sunset"
	helmNamespace = "sunset"
	// helmKubeVersion is the cluster a client-only render assumes.
	helmKubeVersion = "v1.36.0"
)

// helmRender renders the chart as `helm install --dry-run=client` does,
// with the given values, for release sunset in namespace sunset.
func helmRender(t *testing.T, vals map[string]any) ([]byte, error) {
	t.Helper()
	r, err := helmInstall(t, vals)
	if err != nil {
		return nil, err
	}
	require.Empty(t, r.Hooks, "the chart has no hooks: everything is in the manifest")
	return []byte(r.Manifest), nil
}

// helmInstall installs the chart as helm install --dry-run=client does,
// with the given values, for release sunset in namespace sunset.
func helmInstall(t *testing.T, vals map[string]any) (*releasev1.Release, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.DiscardHandler)
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName, install.Namespace = helmRelease, helmNamespace
	install.KubeVersion, err = chartcommon.ParseKubeVersion(helmKubeVersion)
	require.NoError(t, err)
	rel, err := install.RunWithContext(context.Background(), ch, vals)
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*releasev1.Release)
	require.True(t, ok, "a release of type %T", rel)
	return r, nil
}

// exampleValues reads an example values file as Helm's -f does.
func exampleValues(t *testing.T, name string) map[string]any {
	t.Helper()
	vals, err := (&values.Options{ValueFiles: []string{filepath.Join(chartDir, "examples", name)}}).MergeValues(getter.Providers{})
	require.NoError(t, err, name)
	return vals
}

// renderChart renders the chart with an example's values, decoded as the
// kustomize tests decode a kustomization.
func renderChart(t *testing.T, example string) *rendered {
	t.Helper()
	out, err := helmRender(t, exampleValues(t, example))
	require.NoError(t, err, "rendering the chart with %s", example)
	return decodeRendered(t, "helm "+example, out)
}
