package scan_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/scan"
)

// A kustomization reads only under what was given to scan: an overlay
// naming a directory elsewhere on the machine (any that holds a
// kustomization) must not have it built. An overlay scanned without its
// ../../base says how to scan it: the repository root, or
// --kustomize-root.
func TestKustomizeReadsOnlyUnderTheScannedRoot(t *testing.T) {
	elsewhere := t.TempDir()
	write(t, filepath.Join(elsewhere, "kustomization.yaml"), "resources:\n- cron.yaml\n")
	write(t, filepath.Join(elsewhere, "cron.yaml"), "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: "+secretOutside+"}\n")

	repo := t.TempDir()
	write(t, filepath.Join(repo, "base", "kustomization.yaml"), "resources:\n- cron.yaml\n")
	write(t, filepath.Join(repo, "base", "cron.yaml"), "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: report}\n")
	overlay := filepath.Join(repo, "overlays", "prod")
	write(t, filepath.Join(overlay, "kustomization.yaml"), "resources:\n- ../../base\n")
	hostile := filepath.Join(repo, "hostile")
	rel, err := filepath.Rel(hostile, elsewhere)
	require.NoError(t, err)
	write(t, filepath.Join(hostile, "kustomization.yaml"), "resources:\n- "+rel+"\n")
	absolute := filepath.Join(repo, "absolute")
	write(t, filepath.Join(absolute, "kustomization.yaml"), "resources:\n- "+elsewhere+"\n")

	type outcome struct {
		errors   []string
		findings []string
	}
	run := func(files scan.Files, path string) outcome {
		t.Helper()
		res := files.Scan(context.Background(), []string{path})
		var o outcome
		for _, e := range res.Errors {
			o.errors = append(o.errors, e.String())
		}
		for _, f := range res.Findings {
			o.findings = append(o.findings, f.Origin.Path+" "+f.Name)
		}
		require.NotContains(t, allOutputs(t, res), secretOutside)
		return o
	}
	files := scan.Files{Judge: judge(t, "1.37", "")}
	// Both are under the test's temporary directory.
	both := filepath.Dir(repo)
	require.Equal(t, both, filepath.Dir(elsewhere))

	// The overlay alone: its base is outside.
	require.Equal(t, outcome{errors: []string{
		overlay + ": " + filepath.Join(repo, "base") + " is outside the scanned directory " + overlay +
			": a scan reads nothing outside what it was given. Scan " + repo + " (the directory that holds both), or pass --kustomize-root " + repo +
			" to let kustomizations read under it",
	}}, run(files, overlay))

	// The repository root: the overlay and its base are read.
	require.Equal(t, outcome{
		errors: []string{
			absolute + ": " + elsewhere + " is outside the scanned directory " + repo + ": a scan reads nothing outside what it was given. Scan " +
				both + " (the directory that holds both), or pass --kustomize-root " + both + " to let kustomizations read under it",
			hostile + ": " + elsewhere + " is outside the scanned directory " + repo + ": a scan reads nothing outside what it was given. Scan " +
				both + " (the directory that holds both), or pass --kustomize-root " + both + " to let kustomizations read under it",
		},
		findings: []string{filepath.Join(repo, "base") + " report", overlay + " report"},
	}, run(files, repo))

	// The overlay alone, with --kustomize-root at the repository: read.
	files.KustomizeRoot = repo
	require.Equal(t, outcome{findings: []string{overlay + " report"}}, run(files, overlay))
	// Which still stops at the repository.
	require.Equal(t, outcome{errors: []string{
		hostile + ": " + elsewhere + " is outside --kustomize-root " + repo + ": a scan reads nothing outside it. Pass a --kustomize-root that holds both",
	}}, run(files, hostile))

	// A --kustomize-root that does not hold what is scanned is an error.
	files.KustomizeRoot = filepath.Join(repo, "base")
	require.Equal(t, outcome{errors: []string{
		overlay + ": --kustomize-root " + filepath.Join(repo, "base") + " does not hold " + overlay + ": pass a directory that holds what is scanned",
	}}, run(files, overlay))
}
