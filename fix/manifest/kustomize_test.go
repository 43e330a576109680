package manifest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
