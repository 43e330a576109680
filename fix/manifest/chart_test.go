package manifest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const cronJobYAML = "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: j\nspec:\n  schedule: \"* * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: a, image: b}]\n          restartPolicy: Never\n"

// Every file a render reads is visited: a template of any extension, a
// CRD file under crds/; partials, NOTES.txt and hidden files are not.
// What the fix cannot rewrite there and the scan finds is listed by
// CheckFound.
func TestChartFilesAllVisited(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"c/Chart.yaml":                 "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"c/crds/cj.yaml":               cronJobYAML,
		"c/crds/notes.txt":             cronJobYAML,
		"c/templates/cj.json":          `{"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "j"}}` + "\n",
		"c/templates/cj.tpl.yml.txt":   cronJobYAML,
		"c/templates/_helpers.tpl":     cronJobYAML,
		"c/templates/NOTES.txt":        cronJobYAML,
		"c/templates/.hidden.yaml":     cronJobYAML,
		"c/templates/sub/nested.yml":   cronJobYAML,
		"c/charts/s/Chart.yaml":        "apiVersion: v2\nname: s\nversion: 0.1.0\n",
		"c/charts/s/crds/sub-cj.yml":   cronJobYAML,
		"c/charts/s/templates/cj.yaml": cronJobYAML,
	})
	res := fixer(t, true).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Equal(t, []string{
		"c/charts/s/crds/sub-cj.yml line 1: CronJob j batch/v1beta1 -> batch/v1",
		"c/charts/s/templates/cj.yaml line 1: CronJob batch/v1beta1 -> batch/v1",
		"c/crds/cj.yaml line 1: CronJob j batch/v1beta1 -> batch/v1",
		"c/templates/cj.tpl.yml.txt line 1: CronJob batch/v1beta1 -> batch/v1",
		"c/templates/sub/nested.yml line 1: CronJob batch/v1beta1 -> batch/v1",
	}, rewritten)
	require.Empty(t, notRewritten)
	require.Equal(t, 6, res.Files)

	res.CheckFound([]Found{
		{Path: filepath.Join(dir, "c/templates/cj.json"), APIVersion: "batch/v1beta1", Kind: "CronJob"},
		{Path: filepath.Join(dir, "c/crds/cj.yaml"), Line: 1, APIVersion: "batch/v1beta1", Kind: "CronJob"},
		{Path: filepath.Join(dir, "c/templates/../templates/cj.tpl.yml.txt"), APIVersion: "batch/v1beta1", Kind: "CronJob"},
	})
	_, notRewritten = relative(dir, res)
	require.Equal(t, []string{
		"c/templates/cj.json: batch/v1beta1 CronJob: not handled by --fix, though the scan reports it; move it by hand",
	}, notRewritten)
}
