package scan_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/helmchart"
	"github.com/kube-sunset/sunset/scan/report"
)

// secretOutside is a file of the machine running the scan, outside what it
// scans, whose content must never reach any output.
const secretOutside = "kubeconfig-token-7f3a9c"

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func outsideFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config")
	write(t, p, secretOutside+"\n")
	return p
}

func allOutputs(t *testing.T, res report.Result) string {
	t.Helper()
	var all bytes.Buffer
	for _, format := range report.Formats {
		require.NoError(t, res.Write(&all, format, "test", func(s string) string { return s }))
	}
	return all.String()
}

func skippedPaths(res report.Result) []string {
	var out []string
	for _, s := range res.Skipped {
		out = append(out, s.Path)
	}
	return out
}

const chartYAML = "apiVersion: v2\nname: evil\nversion: 1.0.0\n"
const leakTemplate = "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: x{{ .Files.Get \"files/x\" | trim }}\n"

// A chart's files/x symlinked to a file outside the chart: Helm's loader
// would read it, and .Files.Get put it in the rendered name.
func TestChartSymlinkOutOfTheChartIsNotRead(t *testing.T) {
	dir := t.TempDir()
	chart := filepath.Join(dir, "chart")
	write(t, filepath.Join(chart, "Chart.yaml"), chartYAML)
	write(t, filepath.Join(chart, "templates", "cron.yaml"), leakTemplate)
	write(t, filepath.Join(chart, "files", "inside"), "fine\n")
	require.NoError(t, os.Symlink(outsideFile(t), filepath.Join(chart, "files", "x")))
	// A symlink inside the chart is followed.
	require.NoError(t, os.Symlink("inside", filepath.Join(chart, "files", "y")))
	write(t, filepath.Join(chart, "templates", "inside.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{{ .Files.Get \"files/y\" | trim }}\n")
	// And one to a template outside is not.
	outsideTemplate := filepath.Join(t.TempDir(), "t.yaml")
	write(t, outsideTemplate, "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: "+secretOutside+"}\n")
	require.NoError(t, os.Symlink(outsideTemplate, filepath.Join(chart, "templates", "out.yaml")))

	res := scan.Files{Judge: judge(t, "1.37", ""), Charts: helmchart.Renderer{}}.Scan(context.Background(), []string{dir})
	require.Empty(t, res.Errors)
	require.Equal(t, []string{filepath.Join(chart, "files", "x"), filepath.Join(chart, "templates", "out.yaml")}, skippedPaths(res))
	require.Equal(t, 1, res.Removed())
	require.Equal(t, "x", res.Findings[0].Name)
	require.Equal(t, 2, res.Scanned.Objects, "the symlink inside the chart was followed")
	out := allOutputs(t, res)
	require.NotContains(t, out, secretOutside)
	require.Contains(t, out, "a symlink out of the scanned directory")
}

// The same in a chart archive: a symlink entry out of the chart is not
// followed; one to a file of the chart is.
func TestChartArchiveSymlinkEntries(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	add := func(h tar.Header, body string) {
		h.Size = int64(len(body))
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		h.Mode = 0o644
		require.NoError(t, tw.WriteHeader(&h))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	add(tar.Header{Name: "evil/Chart.yaml"}, chartYAML)
	add(tar.Header{Name: "evil/templates/cron.yaml"}, leakTemplate)
	add(tar.Header{Name: "evil/files/x", Typeflag: tar.TypeSymlink, Linkname: "../../../../../.." + outsideFile(t)}, "")
	add(tar.Header{Name: "evil/files/inside"}, "fine\n")
	add(tar.Header{Name: "evil/files/y", Typeflag: tar.TypeSymlink, Linkname: "inside"}, "")
	add(tar.Header{Name: "evil/templates/inside.yaml"}, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{{ .Files.Get \"files/y\" | trim }}\n")
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	tgz := filepath.Join(t.TempDir(), "evil-1.0.0.tgz")
	require.NoError(t, os.WriteFile(tgz, buf.Bytes(), 0o644))

	res := scan.Files{Judge: judge(t, "1.37", ""), Charts: helmchart.Renderer{}}.Scan(context.Background(), []string{tgz})
	require.Empty(t, res.Errors)
	require.Equal(t, []string{tgz + "/files/x"}, skippedPaths(res))
	require.Equal(t, 2, res.Scanned.Objects)
	require.NotContains(t, allOutputs(t, res), secretOutside)
}

// A *.yaml symlink out of the scanned tree is skipped with a note; one
// inside it is read.
func TestManifestSymlinkOutOfTheTreeIsSkipped(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "cron.yaml")
	write(t, outside, "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: "+secretOutside+"}\n")
	write(t, filepath.Join(dir, "real", "ing.yaml"), "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: shop}\n")
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out.yaml")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "real", "ing.yaml"), filepath.Join(dir, "in.yaml")))

	res := scan.Files{Judge: judge(t, "1.37", "")}.Scan(context.Background(), []string{dir})
	require.Empty(t, res.Errors)
	require.Equal(t, []report.Skipped{{Path: filepath.Join(dir, "out.yaml"), Reason: "a symlink out of the scanned directory: not followed"}}, res.Skipped)
	require.Equal(t, 2, res.Removed(), "the Ingress, read twice: itself and through the symlink inside")
	require.NotContains(t, allOutputs(t, res), secretOutside)

	// A file given by name is read under its directory.
	res = scan.Files{Judge: judge(t, "1.37", "")}.Scan(context.Background(), []string{filepath.Join(dir, "out.yaml")})
	require.Len(t, res.Skipped, 1)
	require.Zero(t, res.Removed())
}

// A named pipe called x.yaml would block the scan for ever once opened.
func TestFIFOIsSkipped(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "x.yaml"), 0o644))
	write(t, filepath.Join(dir, "ing.yaml"), "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: shop}\n")
	done := make(chan report.Result, 1)
	files := scan.Files{Judge: judge(t, "1.37", "")}
	go func() { done <- files.Scan(context.Background(), []string{dir}) }()
	select {
	case res := <-done:
		require.Empty(t, res.Errors)
		require.Equal(t, []report.Skipped{{Path: filepath.Join(dir, "x.yaml"), Reason: "a named pipe (FIFO), not a regular file: skipped"}}, res.Skipped)
		require.Equal(t, 1, res.Removed())
		var table bytes.Buffer
		require.NoError(t, res.Write(&table, "table", "test", func(s string) string { return s }))
		require.Contains(t, table.String(), "Skipped "+filepath.Join(dir, "x.yaml")+": a named pipe (FIFO), not a regular file: skipped\n")
	case <-time.After(20 * time.Second):
		t.Fatal("the scan blocked on a named pipe")
	}
}

func kustomization(t *testing.T, resources ...string) string {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "kustomization.yaml"), "resources:\n- "+strings.Join(resources, "\n- ")+"\n")
	return dir
}

// A remote resource is fetched by kustomize itself, from wherever the
// kustomization says (a cloud metadata address, say): not without
// --allow-remote.
func TestRemoteKustomizationFetchesNothing(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: remote}\n"))
	}))
	defer srv.Close()
	url := srv.URL + "/latest/meta-data/cron.yaml"
	for _, dir := range []string{
		kustomization(t, url),
		// kustomize fetches these as the same URL.
		kustomization(t, "GIT::"+url),
		kustomization(t, strings.Replace(url, "http://", "HTTP://", 1)),
		// In a base, and as a generator's file: the same.
		func() string {
			dir := kustomization(t, "base")
			write(t, filepath.Join(dir, "base", "kustomization.yaml"), "configMapGenerator:\n- name: c\n  files:\n  - key="+url+"\n")
			return dir
		}(),
	} {
		res := scan.Files{Judge: judge(t, "1.37", "")}.Scan(context.Background(), []string{dir})
		require.Len(t, res.Errors, 1)
		require.Contains(t, res.Errors[0].Err, `names the remote resource "`)
		require.Contains(t, strings.ToLower(res.Errors[0].Err), url)
		require.Contains(t, res.Errors[0].Err, "--allow-remote")
		require.Zero(t, requests.Load(), "the scan sent a request")
	}

	// Allowed, it is fetched: the server above is reachable.
	res := scan.Files{Judge: judge(t, "1.37", ""), AllowRemote: true}.Scan(context.Background(), []string{kustomization(t, url)})
	require.Empty(t, res.Errors)
	require.Equal(t, 1, res.Removed())
	require.Equal(t, int32(1), requests.Load())
}

// A git base is cloned by kustomize with the git on PATH: not without
// --allow-remote.
func TestGitKustomizationRunsNoGit(t *testing.T) {
	bin := t.TempDir()
	called := filepath.Join(bin, "called")
	write(t, filepath.Join(bin, "git"), "#!/bin/sh\necho \"$@\" >> "+called+"\nexit 1\n")
	require.NoError(t, os.Chmod(filepath.Join(bin, "git"), 0o755))
	t.Setenv("PATH", bin)
	for _, ref := range []string{
		"github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v1.0.6",
		"git@github.com:org/repo.git//base",
		"https://example.com/org/repo.git//base?ref=main",
		"ssh://git@example.com/org/repo//base",
		"git::file:///tmp/repo",
		// kustomize strips git:: and matches its schemes and github.com
		// whatever their case, and clones what follows.
		"GIT::git@evil.example:org/repo//base",
		"Git::deploy@evil.example:org/repo.git//base?ref=main",
		"gIt::GitHub.com/org/repo//base",
		"GIT::HTTPS://evil.example/org/repo//base",
		"GIT::ssh://git@evil.example/org/repo//base",
		"GIT::FILE:///tmp/repo",
		"HTTP://evil.example/org/repo.git//base",
		"SSH://git@evil.example/org/repo//base",
		"File:///tmp/repo",
		"GITHUB.COM:org/repo//base",
		"GitHub.com/org/repo",
		"https://dev.azure.com/org/project/_git/repo/base",
		"Deploy@evil.example:org/repo?ref=v1",
	} {
		t.Run(ref, func(t *testing.T) {
			res := scan.Files{Judge: judge(t, "1.37", "")}.Scan(context.Background(), []string{kustomization(t, ref)})
			require.Len(t, res.Errors, 1, ref)
			require.Contains(t, res.Errors[0].Err, ref)
			require.Contains(t, res.Errors[0].Err, "--allow-remote")
			require.NoFileExists(t, called, "git ran for %s", ref)
		})
	}
	// Allowed, git runs (and fails here).
	res := scan.Files{Judge: judge(t, "1.37", ""), AllowRemote: true}.Scan(context.Background(), []string{kustomization(t, "github.com/org/repo//base")})
	require.Len(t, res.Errors, 1)
	require.FileExists(t, called)
}
