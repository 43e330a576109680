package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The manifest for fixed archives is exactly this: krew's Plugin with
// one platform per archive, each the archive's URL on the release page
// and its sha256.
func TestRenderKrewIsExact(t *testing.T) {
	got, err := renderKrew("v1.2.3", []archive{
		{OS: "linux", Arch: "amd64", Sha256: strings.Repeat("a", 64)},
		{OS: "darwin", Arch: "arm64", Sha256: strings.Repeat("0123456789abcdef", 4)},
	})
	require.NoError(t, err)
	require.Equal(t, `# The krew manifest of `+"`kubectl sunset`"+` for v1.2.3, written by
# `+"`make release`"+` (hack/release) from the archives it built and their
# sha256; do not edit: change hack/release/krew.yaml.tmpl and run make
# release again.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: sunset
spec:
  version: v1.2.3
  homepage: https://github.com/kube-sunset/sunset
  shortDescription: Find who still calls deprecated APIs, before an upgrade
  description: |
    Reads the counts of a Sunset server: who called which deprecated or
    removed Kubernetes API, how often, through which apiserver, from the
    kube-apiserver audit stream. `+"`kubectl sunset report`"+` lists them,
    `+"`kubectl sunset check --target-version 1.37`"+` is an upgrade gate with
    exit codes for CI, `+"`kubectl sunset scan`"+` checks manifests and charts.
    It reads through kube-apiserver with your kubeconfig and context.
  caveats: |
    Sunset must run in or beside the cluster and serve its APIService
    (sunset.dev/v1). Reading needs get and list on sunset.dev, which the
    sunset:view ClusterRole grants (aggregated into view, edit and admin).
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: https://github.com/kube-sunset/sunset/releases/download/v1.2.3/sunset_v1.2.3_linux_amd64.tar.gz
    sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    files:
    - from: sunset
      to: .
    bin: sunset
  - selector:
      matchLabels:
        os: darwin
        arch: arm64
    uri: https://github.com/kube-sunset/sunset/releases/download/v1.2.3/sunset_v1.2.3_darwin_arm64.tar.gz
    sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    files:
    - from: sunset
      to: .
    bin: sunset
`, string(got))
}

// krew refuses a version that is not semver, so the release does too,
// before anything is built: git describe on an untagged commit gives a
// bare hash.
func TestReleaseRefusesAVersionKrewRefuses(t *testing.T) {
	for _, v := range []string{"e7c8920", "e7c8920-dirty", "1.2.3", "v1.2", ""} {
		_, err := renderKrew(v, nil)
		require.Error(t, err, v)
		require.ErrorContains(t, run([]string{"-version", v, "-dir", t.TempDir()}), "vMAJOR.MINOR.PATCH", v)
	}
	_, err := renderKrew("v1.2.3", []archive{{OS: "linux", Arch: "amd64", Sha256: "not a sum"}})
	require.EqualError(t, err, `release: "not a sum" is not a sha256`)
}

// krewPlugin is krew's Plugin manifest (krew.googlecontainertools.github.com/v1alpha2),
// every field the manifest writes, so that a strict decode refuses any
// other.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
			Bin string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// releasePlatforms reads RELEASE_PLATFORMS from the Makefile.
func releasePlatforms(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^RELEASE_PLATFORMS\s*\?=\s*(.+)$`).FindStringSubmatch(string(raw))
	require.NotNil(t, m, "the Makefile sets RELEASE_PLATFORMS")
	return strings.Fields(m[1])
}

// The checked-in deploy/krew/sunset.yaml is what make release writes:
// the template rendered for the version and sums it holds, byte for
// byte, so nobody edits it by hand and it stays YAML that krew (and
// sunset scan ./deploy) read. It passes the checks of krew's
// validate-krew-manifest, and offers only platforms the release builds,
// in the Makefile's order; krew links the binary as kubectl-sunset, the
// name the binary knows itself by as a plugin (cmd/sunset's pluginName).
func TestCheckedInKrewManifestIsGenerated(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/krew/sunset.yaml")
	require.NoError(t, err)
	var p krewPlugin
	require.NoError(t, yaml.UnmarshalStrict(raw, &p))
	require.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", p.APIVersion)
	require.Equal(t, "Plugin", p.Kind)
	require.Equal(t, "sunset", p.Metadata.Name)
	require.Regexp(t, semver, p.Spec.Version)
	require.LessOrEqual(t, len(p.Spec.ShortDescription), 70)
	for _, text := range []string{p.Spec.Description, p.Spec.Caveats} {
		for _, line := range strings.Split(text, "\n") {
			require.LessOrEqual(t, len(line), 80, line)
		}
	}
	var archives []archive
	var platforms []string
	for _, pl := range p.Spec.Platforms {
		require.Len(t, pl.Selector.MatchLabels, 2, "os and arch")
		a := archive{OS: pl.Selector.MatchLabels["os"], Arch: pl.Selector.MatchLabels["arch"], Sha256: pl.Sha256}
		archives = append(archives, a)
		platforms = append(platforms, a.OS+"/"+a.Arch)
	}
	require.NotEmpty(t, platforms)
	all := releasePlatforms(t)
	require.Equal(t, []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}, all)
	var inOrder []string
	for _, pl := range all {
		if slices.Contains(platforms, pl) {
			inOrder = append(inOrder, pl)
		}
	}
	require.Equal(t, inOrder, platforms, "platforms the Makefile builds, in its order")
	want, err := renderKrew(p.Spec.Version, archives)
	require.NoError(t, err)
	require.Equal(t, string(want), string(raw), "deploy/krew/sunset.yaml is not what make release writes")
}

// tarEntry is what an archive says of one of its files.
type tarEntry struct {
	Name         string
	Mode         int64
	UID, GID     int
	Uname, Gname string
	ModTime      time.Time
	Body         string
}

func readArchive(t *testing.T, b []byte) []tarEntry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	require.Empty(t, zr.Name, "no file name in the gzip header")
	require.True(t, zr.ModTime.IsZero(), "no time in the gzip header")
	tr := tar.NewReader(zr)
	var out []tarEntry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		out = append(out, tarEntry{Name: h.Name, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Uname: h.Uname, Gname: h.Gname, ModTime: h.ModTime.UTC(), Body: string(body)})
	}
}

// An archive depends only on its files' names, contents and executable
// bits and on SOURCE_DATE_EPOCH: the same files, touched at other times,
// with other modes and owners' umasks, given in another order, make the
// same bytes; entries are sorted, owned by 0:0, dated the epoch given.
func TestArchivesAreReproducible(t *testing.T) {
	mtime := time.Unix(1795928780, 0).UTC()
	write := func(binMode, readmeMode os.FileMode, touched time.Time, reversed bool) []byte {
		dir := t.TempDir()
		bin, readme := filepath.Join(dir, "sunset"), filepath.Join(dir, "README.md")
		require.NoError(t, os.WriteFile(bin, []byte("\x7fELF binary"), binMode))
		require.NoError(t, os.WriteFile(readme, []byte("# Sunset\n"), readmeMode))
		require.NoError(t, os.Chmod(bin, binMode))
		require.NoError(t, os.Chmod(readme, readmeMode))
		require.NoError(t, os.Chtimes(bin, touched, touched))
		members := []member{{Name: "sunset", Path: bin}, parseMember(readme)}
		if reversed {
			slices.Reverse(members)
		}
		var b bytes.Buffer
		require.NoError(t, writeArchive(&b, members, mtime))
		return b.Bytes()
	}
	first := write(0o755, 0o644, time.Now(), false)
	require.Equal(t, first, write(0o775, 0o664, time.Unix(1, 0), true))
	require.Equal(t, []tarEntry{
		{Name: "README.md", Mode: 0o644, ModTime: mtime, Body: "# Sunset\n"},
		{Name: "sunset", Mode: 0o755, ModTime: mtime, Body: "\x7fELF binary"},
	}, readArchive(t, first))
}

// make release's whole run for two platforms: one archive each, the
// checksums file as sha256sum -c reads it, and the manifest naming the
// archives' sums.
func TestRunWritesArchivesChecksumsAndManifest(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"amd64", "arm64", "README.md"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(f), 0o755))
	}
	out := t.TempDir()
	krew := filepath.Join(out, "sunset.yaml")
	t.Setenv("SOURCE_DATE_EPOCH", "1795928780")
	require.NoError(t, run([]string{"-version", "v1.2.3", "-dir", out, "-krew", krew, "-file", filepath.Join(dir, "README.md"),
		"linux/amd64=" + filepath.Join(dir, "amd64"), "linux/arm64=" + filepath.Join(dir, "arm64")}))
	var sums []string
	for _, pl := range []string{"amd64", "arm64"} {
		name := "sunset_v1.2.3_linux_" + pl + ".tar.gz"
		b, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err)
		require.Equal(t, []tarEntry{
			{Name: "README.md", Mode: 0o755, ModTime: time.Unix(1795928780, 0).UTC(), Body: "README.md"},
			{Name: "sunset", Mode: 0o755, ModTime: time.Unix(1795928780, 0).UTC(), Body: pl},
		}, readArchive(t, b))
		sums = append(sums, sha256Hex(b))
	}
	checksums, err := os.ReadFile(filepath.Join(out, "sunset_v1.2.3_checksums.txt"))
	require.NoError(t, err)
	require.Equal(t, sums[0]+"  sunset_v1.2.3_linux_amd64.tar.gz\n"+sums[1]+"  sunset_v1.2.3_linux_arm64.tar.gz\n", string(checksums))
	manifest, err := os.ReadFile(krew)
	require.NoError(t, err)
	want, err := renderKrew("v1.2.3", []archive{{OS: "linux", Arch: "amd64", Sha256: sums[0]}, {OS: "linux", Arch: "arm64", Sha256: sums[1]}})
	require.NoError(t, err)
	require.Equal(t, string(want), string(manifest))
}
