package manifest

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/internal/testutil/golden"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/report"
)

// fixer moves what a scan at 1.37 reports.
func fixer(t *testing.T, dryRun bool) Fixer {
	t.Helper()
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	table := convert.New(cat)
	j := scan.Judge{Catalog: cat, Target: catalog.MustParseRelease("1.37"), Conversions: table}
	return Fixer{Conversions: table, DryRun: dryRun, Moves: func(apiVersion, kind string) bool {
		for _, f := range j.Judge(scan.Object{APIVersion: apiVersion, Kind: kind}, report.Origin{}) {
			if f.Rule == report.RuleDeprecatedAPI || f.Rule == report.RuleRemovedAPI {
				return true
			}
		}
		return false
	}}
}

// copyTree copies testdata/tree to a new directory, modes kept.
func copyTree(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("testdata", "tree")
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
	return dst
}

// readTree reads every file under dir by its path relative to dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	}))
	return out
}

func relative(dir string, res Result) (rewritten []string, notRewritten []string) {
	for _, f := range res.Rewritten {
		rel, _ := filepath.Rel(dir, f.Path)
		for _, c := range f.Changes {
			rewritten = append(rewritten, filepath.ToSlash(rel)+" "+c.String())
		}
	}
	for _, n := range res.NotRewritten {
		if rel, err := filepath.Rel(dir, n.Path); err == nil {
			n.Path = filepath.ToSlash(rel)
		}
		notRewritten = append(notRewritten, n.String())
	}
	return rewritten, notRewritten
}

// What a fix of the fixture tree at 1.37 rewrites, each change by file
// and line, and what it leaves, with the reason: exactly.
var (
	wantRewritten = []string{
		"chart/templates/cronjob.yaml line 1: CronJob batch/v1beta1 -> batch/v1",
		"kustomize/cronjob-patch.yaml line 1: CronJob nightly batch/v1beta1 -> batch/v1",
		"kustomize/cronjob.yaml line 1: CronJob nightly batch/v1beta1 -> batch/v1",
		"kustomize/ingress-patch.yaml line 1: Ingress admin networking.k8s.io/v1beta1 -> networking.k8s.io/v1",
		"kustomize/ingress.yaml line 1: Ingress admin networking.k8s.io/v1beta1 -> networking.k8s.io/v1",
		"kustomize/kustomization.yaml line 10: CronJob (the target of patches[2]) batch/v1beta1 -> batch/v1",
		"kustomize/rbac.yaml line 2: ClusterRole shop-reader rbac.authorization.k8s.io/v1beta1 -> rbac.authorization.k8s.io/v1",
		"manifests/commented.yaml line 12: Ingress shop extensions/v1beta1 -> networking.k8s.io/v1",
		"manifests/commented.yaml line 40: CronJob monthly-report batch/v1beta1 -> batch/v1",
		"manifests/crlf.yaml line 2: Deployment worker apps/v1beta1 -> apps/v1",
		"manifests/crlf.yaml line 19: HorizontalPodAutoscaler worker autoscaling/v2beta2 -> autoscaling/v2",
		"manifests/cronjob.json line 1: CronJob nightly-json batch/v1beta1 -> batch/v1",
		"manifests/list.yaml line 5: Ingress canary networking.k8s.io/v1beta1 -> networking.k8s.io/v1",
	}
	ingressFields = "backend serviceName and servicePort become service.name and service.port.number or .name, " +
		"spec.backend becomes spec.defaultBackend, and a path without pathType gets ImplementationSpecific, the old default"
	wantNotRewritten = []string{
		`chart/templates/ingress.yaml:1: the apiVersion of Ingress is templated ({{ if .Capabilities.APIVersions.Has "networking.k8s.io/v1/Ingress" }}networking.k8s.io/v1{{ else }}extensions/v1beta1{{ end }}): a template's logic is not rewritten; check what it renders for the target and edit it by hand`,
		"chart/templates/pdb.yaml:1: policy/v1beta1 PodDisruptionBudget: moving it to policy/v1 PodDisruptionBudget is a move that changes fields or refuses some objects (an empty spec.selector (no matchLabels and no matchExpressions) selects no pods in v1beta1 and every pod of the namespace in v1; such a budget is refused), which a template is not rewritten for; check it and edit it by hand",
		"manifests/broken.yaml: not YAML or JSON: yaml: line 2: did not find expected ',' or ']'",
		"manifests/ingress.json:1: a JSON manifest: moving extensions/v1beta1 Ingress to networking.k8s.io/v1 Ingress changes fields (" + ingressFields + "), and JSON is rewritten only where apiVersion alone changes; convert it by hand, or write it as YAML",
		"manifests/psp.yaml:2: policy/v1beta1 PodSecurityPolicy is not moved: PodSecurityPolicy has no replacement; move its rules to Pod Security Admission or a policy engine",
	}
)

// The fixture tree fixed: every rewritten file equals its golden, every
// other file is byte for byte as it was, and the lists are exact.
func TestFixGoldens(t *testing.T) {
	dir := copyTree(t)
	before := readTree(t, dir)
	res := fixer(t, false).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Equal(t, wantRewritten, rewritten)
	require.Equal(t, wantNotRewritten, notRewritten)
	require.Equal(t, 17, res.Files) // 8 manifests, a kustomization and its 5 files, 3 templates

	after := readTree(t, dir)
	require.ElementsMatch(t, slices.Collect(maps.Keys(before)), slices.Collect(maps.Keys(after)), "files were added or removed")
	changed := map[string]bool{}
	for _, f := range res.Rewritten {
		rel, _ := filepath.Rel(dir, f.Path)
		rel = filepath.ToSlash(rel)
		changed[rel] = true
		require.Equal(t, string(f.After), string(after[rel]), "%s: what is written is what the result says", rel)
		golden.Assert(t, filepath.Join("testdata", "golden", rel), after[rel])
	}
	for rel, b := range before {
		if !changed[rel] {
			require.Equal(t, string(b), string(after[rel]), "%s is not rewritten and must stay as it was", rel)
		}
	}
	require.Len(t, changed, 11)

	var diffs strings.Builder
	for _, f := range res.Rewritten {
		rel, _ := filepath.Rel(dir, f.Path)
		f.Path = filepath.ToSlash(rel)
		d, err := f.Diff()
		require.NoError(t, err)
		diffs.WriteString(d)
	}
	golden.Assert(t, filepath.Join("testdata", "golden", "fix.diff"), []byte(diffs.String()))
}

// A dry run computes the same rewrites and writes nothing.
func TestDryRunWritesNothing(t *testing.T) {
	dir := copyTree(t)
	before := readTree(t, dir)
	res := fixer(t, true).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Equal(t, wantRewritten, rewritten)
	require.Equal(t, wantNotRewritten, notRewritten)
	require.Equal(t, before, readTree(t, dir))
	for _, f := range res.Rewritten {
		rel, _ := filepath.Rel(dir, f.Path)
		want, err := os.ReadFile(filepath.Join("testdata", "golden", rel))
		require.NoError(t, err)
		require.Equal(t, string(want), string(f.After), rel)
	}
}

// A second fix of the fixed tree changes nothing, and lists the same
// files it cannot rewrite.
func TestSecondFixChangesNothing(t *testing.T) {
	dir := copyTree(t)
	fixer(t, false).Fix(context.Background(), []string{dir})
	fixed := readTree(t, dir)
	res := fixer(t, false).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Empty(t, rewritten)
	require.Equal(t, wantNotRewritten, notRewritten)
	require.Equal(t, fixed, readTree(t, dir))
}

// A file given is fixed under its own directory: a manifest alone, a
// kustomization.yaml as its kustomization, a Chart.yaml as its chart; a
// packed chart and standard input are listed.
func TestFixPathsGiven(t *testing.T) {
	dir := copyTree(t)
	res := fixer(t, true).Fix(context.Background(), []string{
		filepath.Join(dir, "manifests", "crlf.yaml"),
		filepath.Join(dir, "kustomize", "kustomization.yaml"),
		filepath.Join(dir, "chart", "Chart.yaml"),
		filepath.Join(dir, "chart.tgz"),
		"-",
	})
	rewritten, notRewritten := relative(dir, res)
	require.Equal(t, []string{
		"chart/templates/cronjob.yaml line 1: CronJob batch/v1beta1 -> batch/v1",
		"kustomize/cronjob-patch.yaml line 1: CronJob nightly batch/v1beta1 -> batch/v1",
		"kustomize/cronjob.yaml line 1: CronJob nightly batch/v1beta1 -> batch/v1",
		"kustomize/ingress-patch.yaml line 1: Ingress admin networking.k8s.io/v1beta1 -> networking.k8s.io/v1",
		"kustomize/ingress.yaml line 1: Ingress admin networking.k8s.io/v1beta1 -> networking.k8s.io/v1",
		"kustomize/kustomization.yaml line 10: CronJob (the target of patches[2]) batch/v1beta1 -> batch/v1",
		"kustomize/rbac.yaml line 2: ClusterRole shop-reader rbac.authorization.k8s.io/v1beta1 -> rbac.authorization.k8s.io/v1",
		"manifests/crlf.yaml line 2: Deployment worker apps/v1beta1 -> apps/v1",
		"manifests/crlf.yaml line 19: HorizontalPodAutoscaler worker autoscaling/v2beta2 -> autoscaling/v2",
	}, rewritten)
	require.Equal(t, []string{
		"-: standard input is not a file to rewrite: give the files or directories",
		"chart.tgz: stat " + filepath.Join(dir, "chart.tgz") + ": no such file or directory",
		wantNotRewritten[0], wantNotRewritten[1],
	}, notRewritten)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "chart.tgz"), []byte("packed"), 0o644))
	res = fixer(t, true).Fix(context.Background(), []string{filepath.Join(dir, "chart.tgz")})
	_, notRewritten = relative(dir, res)
	require.Equal(t, []string{"chart.tgz: a packed chart is not rewritten: unpack it, fix the directory and package it again"}, notRewritten)
}
