package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/golden"
)

const fixTree = "../../fix/manifest/testdata/tree"

// copyFixTree copies the fix fixtures to tree/ in a new working
// directory, so that the output names them by a short relative path.
// It returns the fixtures' directory.
func copyFixTree(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(fixTree)
	require.NoError(t, err)
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, "tree", rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "tree", rel), b, 0o644)
	}))
	return src
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// `sunset scan --fix --dry-run` prints the diff, what it leaves and why,
// writes nothing and exits 1 for what it leaves; `--fix` writes the
// goldens of package fix/manifest and says what moved; a second `--fix`
// moves nothing and says so.
func TestScanFix(t *testing.T) {
	// A directory of their own: testdata's own files are the goldens whose
	// numbers golden_counts_test.go checks.
	goldenDir, err := filepath.Abs(filepath.Join("testdata", "scanfix"))
	require.NoError(t, err)
	manifestGoldens, err := filepath.Abs("../../fix/manifest/testdata/golden")
	require.NoError(t, err)
	src := copyFixTree(t)
	psp := readFile(t, "tree/manifests/psp.yaml")

	stdout, stderr, code := runCLI("scan", "--target-version", "1.37", "--fix", "--dry-run", "tree")
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stderr)
	golden.Assert(t, filepath.Join(goldenDir, "fix-dry-run.golden"), []byte(stdout))
	require.Equal(t, readFile(t, filepath.Join(src, "manifests/commented.yaml")), readFile(t, "tree/manifests/commented.yaml"), "a dry run writes nothing")

	stdout, stderr, code = runCLI("scan", "--target-version", "1.37", "--fix", "tree")
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stderr)
	golden.Assert(t, filepath.Join(goldenDir, "fix.golden"), []byte(stdout))
	for _, rel := range []string{"manifests/commented.yaml", "manifests/crlf.yaml", "manifests/list.yaml", "kustomize/ingress.yaml", "chart/templates/cronjob.yaml"} {
		require.Equal(t, readFile(t, filepath.Join(manifestGoldens, rel)), readFile(t, filepath.Join("tree", rel)), rel)
	}
	require.Equal(t, psp, readFile(t, "tree/manifests/psp.yaml"), "a refused PodSecurityPolicy stays as it was")

	stdout, stderr, code = runCLI("scan", "--target-version", "1.37", "--fix", "tree")
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stderr)
	golden.Assert(t, filepath.Join(goldenDir, "fix-again.golden"), []byte(stdout))

	// Once what is left is removed, the fixed tree is clean: exit 0.
	for _, rel := range []string{"manifests/psp.yaml", "manifests/broken.yaml", "manifests/ingress.json", "kustomize", "chart"} {
		require.NoError(t, os.RemoveAll(filepath.Join("tree", rel)))
	}
	stdout, stderr, code = runCLI("scan", "--target-version", "1.37", "--fix", "tree")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "Nothing to rewrite in 5 files read.\n", stdout)
	stdout, _, code = runCLI("scan", "--target-version", "1.37", "tree")
	require.Equal(t, 0, code)
	require.Equal(t, "No deprecated or removed APIs found in 5 files (9 objects).\nSafe to upgrade to 1.37: no object uses a deprecated API.\n", stdout)
}

func TestScanFixFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--dry-run", "tree"}, "Error: --dry-run goes with --fix: sunset scan --fix --dry-run prints the rewrite and writes nothing\n"},
		{[]string{"--fix", "-"}, "Error: --fix rewrites files in place, and standard input is not one: give the files or directories\n"},
		{[]string{"--fix"}, "Error: --fix rewrites files: give the directories or files to fix\n"},
		{[]string{"--fix", "-o", "json", "tree"}, "Error: --fix prints what it changes as text; -o json is for the scan's findings\n"},
		{[]string{"--fix", "--context", "prod", "tree"}, "Error: --fix rewrites files, not a cluster: drop --kubeconfig and --context\n"},
	} {
		t.Run(tc.wantErr, func(t *testing.T) {
			stdout, stderr, code := runCLI(append([]string{"scan", "--target-version", "1.37"}, tc.args...)...)
			require.Equal(t, 1, code)
			require.Empty(t, stdout)
			require.Equal(t, tc.wantErr, stderr)
		})
	}
}

// Every object the scan reports in a chart is moved or listed: a CRD
// under crds/ and a template named .yml.txt are rewritten, and a JSON
// template, which --fix does not rewrite, is listed; the fix exits 1.
func TestScanFixChartFilesScanned(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cronJob := "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: j\nspec:\n  schedule: \"* * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: a, image: b}]\n          restartPolicy: Never\n"
	for rel, text := range map[string]string{
		"c/Chart.yaml":               "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"c/crds/cj.yaml":             cronJob,
		"c/templates/cj.json":        `{"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "k"}, "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "b"}], "restartPolicy": "Never"}}}}}}` + "\n",
		"c/templates/cj.tpl.yml.txt": strings.Replace(cronJob, "name: j", "name: l", 1),
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(rel), 0o755))
		require.NoError(t, os.WriteFile(rel, []byte(text), 0o644))
	}
	stdout, stderr, code := runCLI("scan", "--target-version", "1.37", "--fix", "c")
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stderr)
	require.Equal(t, "rewrote c/crds/cj.yaml\n"+
		"  line 1: CronJob j batch/v1beta1 -> batch/v1\n"+
		"rewrote c/templates/cj.tpl.yml.txt\n"+
		"  line 1: CronJob batch/v1beta1 -> batch/v1\n"+
		"not rewritten: c/templates/cj.json: batch/v1beta1 CronJob: not handled by --fix, though the scan reports it; move it by hand\n"+
		"2 changes written to 2 files. 1 not rewritten, listed above.\n", stdout)
	require.Equal(t, strings.Replace(cronJob, "batch/v1beta1", "batch/v1", 1), readFile(t, "c/crds/cj.yaml"))
}

// With --current-version, an object is not moved to a replacement the
// cluster does not serve yet: flowcontrol v1 is from 1.29, so at 1.27 the
// v1beta3 FlowSchema is listed and left, and at 1.29 it moves.
func TestScanFixCurrentVersion(t *testing.T) {
	t.Chdir(t.TempDir())
	flowSchema := "apiVersion: flowcontrol.apiserver.k8s.io/v1beta3\nkind: FlowSchema\nmetadata: {name: f}\nspec:\n  priorityLevelConfiguration: {name: p}\n"
	require.NoError(t, os.WriteFile("fs.yaml", []byte(flowSchema), 0o644))
	stdout, stderr, code := runCLI("scan", "--target-version", "1.37", "--current-version", "1.27", "--fix", "fs.yaml")
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stderr)
	require.Equal(t, "not rewritten: fs.yaml:1: flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema is not moved: its replacement flowcontrol.apiserver.k8s.io/v1 FlowSchema is not served by 1.27 (it is from 1.29); upgrade first, or drop --current-version\n"+
		"Nothing to rewrite in 1 file read. 1 not rewritten, listed above.\n", stdout)
	require.Equal(t, flowSchema, readFile(t, "fs.yaml"))

	stdout, stderr, code = runCLI("scan", "--target-version", "1.37", "--current-version", "1.29", "--fix", "fs.yaml")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "rewrote fs.yaml\n  line 1: FlowSchema f flowcontrol.apiserver.k8s.io/v1beta3 -> flowcontrol.apiserver.k8s.io/v1\n1 change written to 1 file.\n", stdout)
}
