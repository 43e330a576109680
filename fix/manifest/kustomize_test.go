package manifest

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// writeTree writes files, by path relative to a new directory, and
// returns the directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	return dir
}

const (
	emptySelectorPDB = "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: all\nspec:\n  minAvailable: 1\n  selector: {}\n"
	pdbOverlay       = "resources:\n  - ../base\npatches:\n  - target: {group: policy, version: v1beta1, kind: PodDisruptionBudget}\n    patch: |-\n      - op: replace\n        path: /spec/minAvailable\n        value: 2\n"
)

// A base the walk reaches before the overlay that includes it is read
// once, and the overlay still learns that it left its budget: the
// overlay's patch target stays on policy/v1beta1, where the budget is.
func TestSharedBaseKeepsOverlayTarget(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"base/kustomization.yaml":    "resources:\n  - pdb.yaml\n",
		"base/pdb.yaml":              emptySelectorPDB,
		"overlay/kustomization.yaml": pdbOverlay,
	})
	before := readTree(t, dir)
	res := fixer(t, false).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Empty(t, rewritten)
	require.Equal(t, []string{
		"base/pdb.yaml:1: policy/v1beta1 PodDisruptionBudget is not moved to policy/v1 PodDisruptionBudget: spec.selector has no matchLabels and no matchExpressions: it selects no pods in policy/v1beta1 and every pod in the namespace in policy/v1; remove it or write the labels meant",
		"overlay/kustomization.yaml:4: patches[0] targets policy/v1beta1 PodDisruptionBudget, which moves to policy/v1 PodDisruptionBudget, but not every object of it here was moved (see the list): the target is left; move them and it together by hand",
	}, notRewritten)
	require.Equal(t, 3, res.Files)
	require.Equal(t, before, readTree(t, dir))
}

// kustomizeBuild runs kustomize on dir as `kubectl kustomize` does and returns
// its objects by "kind name".
func kustomizeBuild(t *testing.T, dir string) map[string]map[string]any {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	out := map[string]map[string]any{}
	for _, r := range m.Resources() {
		obj, err := r.Map()
		require.NoError(t, err)
		out[r.GetKind()+" "+r.GetName()] = obj
	}
	return out
}

// asJSON is v as JSON, so that numbers compare by value, not Go type.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// A kustomization is one unit per API: a patch and the objects it
// patches stay on one API, so each fixed kustomization still builds, and
// builds the objects it built before, each either as it was or as the
// conversion makes it; the apiVersions it builds are exact.
func TestKustomizationStaysOneUnit(t *testing.T) {
	ingress := "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: a}\nspec:\n  rules:\n  - http:\n      paths:\n      - path: /\n        backend: {serviceName: a, servicePort: 80}\n"
	cronJob := "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: j}\nspec:\n  schedule: \"* * * * *\"\n  jobTemplate: {spec: {template: {spec: {containers: [{name: a, image: b}], restartPolicy: Never}}}}\n"
	role := "apiVersion: rbac.authorization.k8s.io/v1beta1\nkind: Role\nmetadata: {name: r}\nrules: []\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		// fix is the directory fixed, build the kustomization built.
		fix, build   string
		apiVersions  map[string]string
		notRewritten []string
	}{{
		// The Ingress moves with changed fields and its patch, which
		// sets an old field, cannot: both stay; the Role moves.
		name: "patch of changed fields",
		files: map[string]string{
			"k/kustomization.yaml": "resources: [ing.yaml, role.yaml]\npatches:\n  - path: patch.yaml\n",
			"k/ing.yaml":           ingress,
			"k/role.yaml":          role,
			"k/patch.yaml":         "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: a}\nspec:\n  backend: {serviceName: b, servicePort: 81}\n",
		},
		fix: "k", build: "k",
		apiVersions: map[string]string{"Ingress a": "extensions/v1beta1", "Role r": "rbac.authorization.k8s.io/v1"},
		notRewritten: []string{
			"k/ing.yaml:1: extensions/v1beta1 Ingress is left with the rest of its kustomization, where an object or patch of it is left (see the list): kustomize matches a patch only to objects of its own API; move them together by hand",
			"k/patch.yaml:1: a kustomize patch of extensions/v1beta1 Ingress: moving it to networking.k8s.io/v1 Ingress changes fields it holds, or is refused for it (" + ingressFields + "); move the patch by hand",
		},
	}, {
		// Only the overlay is fixed: its base is out of reach and
		// left, so the overlay's patch stays with it.
		name: "base out of the scanned directory",
		files: map[string]string{
			"base/kustomization.yaml":    "resources: [cj.yaml]\n",
			"base/cj.yaml":               cronJob,
			"overlay/kustomization.yaml": "resources: [../base]\npatches:\n  - path: p.yaml\n",
			"overlay/p.yaml":             "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: j}\nspec:\n  schedule: \"0 * * * *\"\n",
		},
		fix: "overlay", build: "overlay",
		apiVersions: map[string]string{"CronJob j": "batch/v1beta1"},
		notRewritten: []string{
			"base: outside the scanned directory; fix it from a directory that holds it",
			"overlay/p.yaml:1: batch/v1beta1 CronJob is left with the rest of its kustomization, where an object or patch of it is left (see the list): kustomize matches a patch only to objects of its own API; move them together by hand",
		},
	}, {
		// The whole tree fixed: base and overlay move together.
		name: "base and overlay",
		files: map[string]string{
			"base/kustomization.yaml":    "resources: [cj.yaml]\n",
			"base/cj.yaml":               cronJob,
			"overlay/kustomization.yaml": "resources: [../base]\npatches:\n  - path: p.yaml\n",
			"overlay/p.yaml":             "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: j}\nspec:\n  schedule: \"0 * * * *\"\n",
		},
		fix: ".", build: "overlay",
		apiVersions: map[string]string{"CronJob j": "batch/v1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, tc.files)
			before := kustomizeBuild(t, filepath.Join(dir, tc.build))
			res := fixer(t, false).Fix(context.Background(), []string{filepath.Join(dir, tc.fix)})
			_, notRewritten := relative(dir, res)
			require.Equal(t, tc.notRewritten, notRewritten)
			after := kustomizeBuild(t, filepath.Join(dir, tc.build))
			require.ElementsMatch(t, slices.Collect(maps.Keys(before)), slices.Collect(maps.Keys(after)))
			table := fixer(t, false).Conversions
			for name, obj := range after {
				require.Equal(t, tc.apiVersions[name], obj["apiVersion"], name)
				want := before[name]
				if obj["apiVersion"] != want["apiVersion"] {
					converted, err := table.Convert(want)
					require.NoError(t, err)
					want = converted
				}
				require.Equal(t, asJSON(t, want), asJSON(t, obj), name)
			}
		})
	}
}

// The fixture kustomization still builds once fixed, each object as it
// was or as the conversion makes it.
func TestFixtureKustomizationBuilds(t *testing.T) {
	dir := copyTree(t)
	k := filepath.Join(dir, "kustomize")
	before := kustomizeBuild(t, k)
	fixer(t, false).Fix(context.Background(), []string{dir})
	after := kustomizeBuild(t, k)
	require.ElementsMatch(t, slices.Collect(maps.Keys(before)), slices.Collect(maps.Keys(after)))
	table := fixer(t, false).Conversions
	got := map[string]any{}
	for name, obj := range after {
		got[name] = obj["apiVersion"]
		converted, err := table.Convert(before[name])
		require.NoError(t, err)
		require.Equal(t, asJSON(t, converted), asJSON(t, obj), name)
	}
	require.Equal(t, map[string]any{
		"CronJob nightly":         "batch/v1",
		"Ingress admin":           "networking.k8s.io/v1",
		"ClusterRole shop-reader": "rbac.authorization.k8s.io/v1",
	}, got)
}
