package manifest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

const cronJob = "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: %s\n"

func write(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), mode))
	require.NoError(t, os.Chmod(path, mode))
}

// A fix writes only regular files inside the scanned directory: a
// symlink out of it is listed and its target left, a symlink inside is
// followed to the one file it names, which is rewritten once and keeps
// its mode, a FIFO is never opened, and a kustomization's file above the
// directory is listed.
func TestFixStaysInTheScannedDirectory(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside.yaml")
	write(t, outside, strings.ReplaceAll(cronJob, "%s", "outside"), 0o644)
	dir := filepath.Join(base, "repo")
	write(t, filepath.Join(dir, "a-real.yaml"), strings.ReplaceAll(cronJob, "%s", "real"), 0o640)
	require.NoError(t, os.Symlink("a-real.yaml", filepath.Join(dir, "b-link.yaml")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "c-out.yaml")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "d-pipe.yaml"), 0o644))
	write(t, filepath.Join(dir, "kustomize", "kustomization.yaml"), "resources:\n- ../../outside.yaml\n- https://example.com/x.yaml\n", 0o644)

	res := fixer(t, false).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Equal(t, []string{"a-real.yaml line 1: CronJob real batch/v1beta1 -> batch/v1"}, rewritten)
	require.Equal(t, []string{
		"../outside.yaml: outside the scanned directory; fix it from a directory that holds it",
		"c-out.yaml: a symlink out of the scanned directory: not followed",
		"d-pipe.yaml: a named pipe (FIFO), not a regular file: skipped",
		`kustomize/kustomization.yaml: names the remote resource "https://example.com/x.yaml": only local files are rewritten`,
	}, notRewritten)

	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, strings.ReplaceAll(cronJob, "%s", "outside"), string(b))
	b, err = os.ReadFile(filepath.Join(dir, "a-real.yaml"))
	require.NoError(t, err)
	require.Equal(t, "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: real\n", string(b))
	info, err := os.Lstat(filepath.Join(dir, "a-real.yaml"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), info.Mode())
	info, err = os.Lstat(filepath.Join(dir, "b-link.yaml"))
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, info.Mode()&os.ModeSymlink, "the symlink stays a symlink")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 5, "no temporary file is left")
}

// An object the conversion refuses is listed with the table's reason and
// left as it was; the file's other documents are still moved. A
// document over the scan's bound leaves the whole file.
func TestRefusedObjectsAndBounds(t *testing.T) {
	dir := t.TempDir()
	mixed := "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata:\n  name: rolled\nspec:\n  rollbackTo: {revision: 2}\n" +
		"  template:\n    metadata:\n      labels: {app: x}\n---\n" + strings.ReplaceAll(cronJob, "%s", "kept")
	write(t, filepath.Join(dir, "mixed.yaml"), mixed, 0o644)
	huge := strings.ReplaceAll(cronJob, "%s", "huge") + "data:\n  x: " + strings.Repeat("a", 3<<20) + "\n"
	write(t, filepath.Join(dir, "huge.yaml"), huge, 0o644)

	res := fixer(t, false).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Equal(t, []string{"mixed.yaml line 11: CronJob kept batch/v1beta1 -> batch/v1"}, rewritten)
	require.Equal(t, []string{
		"huge.yaml: too large: the YAML document at line 1 is larger than 3 MiB",
		"mixed.yaml:1: extensions/v1beta1 Deployment is not moved to apps/v1 Deployment: spec.rollbackTo is set, and apps/v1 has no such field",
	}, notRewritten)
	b, err := os.ReadFile(filepath.Join(dir, "mixed.yaml"))
	require.NoError(t, err)
	require.Equal(t, strings.Replace(mixed, "batch/v1beta1", "batch/v1", 1), string(b))
	b, err = os.ReadFile(filepath.Join(dir, "huge.yaml"))
	require.NoError(t, err)
	require.Equal(t, huge, string(b))
}

// In a kustomization, a patch holding fields the conversion changes is
// listed, as is an inline patch of an API that moves; a patch target
// stays where an object of its API was left, and the kustomization with
// it.
func TestKustomizationLeftTogether(t *testing.T) {
	dir := t.TempDir()
	kustomization := `resources:
- deploy.yaml
patches:
- path: patch.yaml
- target:
    group: extensions
    version: v1beta1
    kind: Deployment
  patch: |-
    - op: replace
      path: /spec/replicas
      value: 3
- patch: |-
    apiVersion: batch/v1beta1
    kind: CronJob
    metadata: {name: nightly}
    spec: {suspend: true}
`
	write(t, filepath.Join(dir, "kustomization.yaml"), kustomization, 0o644)
	deploy := "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata:\n  name: rolled\nspec:\n  rollbackTo: {revision: 2}\n" +
		"  template:\n    metadata:\n      labels: {app: x}\n"
	write(t, filepath.Join(dir, "deploy.yaml"), deploy, 0o644)
	patch := "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata:\n  name: rolled\nspec:\n  template:\n    metadata:\n      labels: {tier: web}\n"
	write(t, filepath.Join(dir, "patch.yaml"), patch, 0o644)

	res := fixer(t, false).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Empty(t, rewritten)
	require.Equal(t, []string{
		"deploy.yaml:1: extensions/v1beta1 Deployment is not moved to apps/v1 Deployment: spec.rollbackTo is set, and apps/v1 has no such field",
		"kustomization.yaml: the inline patch patches[2] is of batch/v1beta1 CronJob, which moves: a patch written in the kustomization is not rewritten; move it by hand",
		"kustomization.yaml:6: patches[1] targets extensions/v1beta1 Deployment, which moves to apps/v1 Deployment, but not every object of it here was moved (see the list): the target is left; move them and it together by hand",
		"patch.yaml:1: a kustomize patch of extensions/v1beta1 Deployment: moving it to apps/v1 Deployment changes fields it holds, or is refused for it (apps/v1 requires spec.selector, which gets the template's labels as the old API defaulted it; the old defaults are written out where unset: spec.revisionHistoryLimit 2147483647, spec.progressDeadlineSeconds 2147483647, spec.strategy.rollingUpdate maxSurge 1 and maxUnavailable 1; an object setting spec.rollbackTo, which apps/v1 removed, is refused); move the patch by hand",
	}, notRewritten)
	for name, want := range map[string]string{"kustomization.yaml": kustomization, "deploy.yaml": deploy, "patch.yaml": patch} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			require.Equal(t, want, string(b), name)
		})
	}
}

// An object whose changed fields are YAML anchors or aliases is listed
// and left, since editing the one would change the others; in a List,
// the check of the rewritten document leaves the whole document.
func TestAnchorsAreLeft(t *testing.T) {
	dir := t.TempDir()
	anchored := `apiVersion: extensions/v1beta1
kind: Ingress
metadata: {name: anchored}
spec:
  backend: &b
    serviceName: web
    servicePort: 80
  rules:
  - http:
      paths:
      - path: /
        backend: *b
`
	write(t, filepath.Join(dir, "anchored.yaml"), anchored, 0o644)
	list := "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(anchored, "\n"), "\n", "\n  ") + "\n" +
		"- apiVersion: networking.k8s.io/v1beta1\n  kind: Ingress\n  metadata: {name: plain}\n  spec:\n    backend: {serviceName: web, servicePort: 80}\n"
	write(t, filepath.Join(dir, "list.yaml"), list, 0o644)

	res := fixer(t, false).Fix(context.Background(), []string{dir})
	rewritten, notRewritten := relative(dir, res)
	require.Empty(t, rewritten)
	require.Equal(t, []string{
		"anchored.yaml:1: extensions/v1beta1 Ingress: spec.rules[0].http.paths[0].backend uses a YAML anchor or alias, which a rewrite could change; convert it by hand",
		"list.yaml:1: the rewritten document would not be exactly the conversion (yaml: unknown anchor 'b' referenced); convert it by hand",
		"list.yaml:4: extensions/v1beta1 Ingress: spec.rules[0].http.paths[0].backend uses a YAML anchor or alias, which a rewrite could change; convert it by hand",
	}, notRewritten)
	for name, want := range map[string]string{"anchored.yaml": anchored, "list.yaml": list} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			require.Equal(t, want, string(b), name)
		})
	}
}
