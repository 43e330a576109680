package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// releasePlatforms are the os/arch pairs the krew manifest offers. The
// project has no release build yet: the manifest assumes one that builds
// `make build`'s binary for each of these (CGO_ENABLED=0, so they
// cross-compile) into sunset_<tag>_<os>_<arch>.tar.gz, holding sunset at
// its top. Only Linux builds today: package store uses Linux's statfs,
// flock and mmap.
var releasePlatforms = []string{"linux/amd64", "linux/arm64"}

// krewPlugin is krew's Plugin manifest (krew.googlecontainertools.github.com/v1alpha2).
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
			Selector metav1.LabelSelector `json:"selector"`
			URI      string               `json:"uri"`
			Sha256   string               `json:"sha256"`
			Files    []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
			Bin string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// renderKrewManifest renders the template as krew-release-bot does for a
// tag: addURIAndSha fills in an archive's URL and its sha256, here the
// sha256 of the URL, as no archive exists.
func renderKrewManifest(t *testing.T, tag string) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/krew/sunset.yaml")
	require.NoError(t, err)
	tmpl, err := template.New("sunset.yaml").Funcs(template.FuncMap{
		"addURIAndSha": func(url, tag string) (string, error) {
			var u bytes.Buffer
			if err := template.Must(template.New("url").Parse(url)).Execute(&u, map[string]string{"TagName": tag}); err != nil {
				return "", err
			}
			sum := sha256.Sum256(u.Bytes())
			return fmt.Sprintf("uri: %s\n    sha256: %s", u.String(), hex.EncodeToString(sum[:])), nil
		},
	}).Parse(string(raw))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, tmpl.Execute(&out, map[string]string{"TagName": tag}))
	return out.Bytes()
}

// The manifest is one krew accepts (the checks of krew's
// validate-krew-manifest), names the binary a release archive holds,
// and offers exactly the release's platforms; krew links the binary as
// kubectl-sunset, the name the binary knows itself by as a plugin.
func TestKrewManifest(t *testing.T) {
	var p krewPlugin
	require.NoError(t, yaml.UnmarshalStrict(renderKrewManifest(t, "v1.2.3"), &p))
	require.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", p.APIVersion)
	require.Equal(t, "Plugin", p.Kind)
	require.Equal(t, pluginName, "kubectl-"+p.Metadata.Name)
	require.Equal(t, "v1.2.3", p.Spec.Version)
	require.LessOrEqual(t, len(p.Spec.ShortDescription), 70)
	for _, text := range []string{p.Spec.Description, p.Spec.Caveats} {
		for _, line := range strings.Split(text, "\n") {
			require.LessOrEqual(t, len(line), 80, line)
		}
	}
	sha := regexp.MustCompile(`^[a-f0-9]{64}$`)
	var platforms []string
	for _, pl := range p.Spec.Platforms {
		require.Empty(t, pl.Selector.MatchExpressions)
		require.Len(t, pl.Selector.MatchLabels, 2, "os and arch")
		goos, goarch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		platforms = append(platforms, goos+"/"+goarch)
		const bin = "sunset"
		require.Equal(t, bin, pl.Bin)
		require.Len(t, pl.Files, 1)
		require.Equal(t, bin, pl.Files[0].From)
		require.Equal(t, ".", pl.Files[0].To)
		require.Equal(t, fmt.Sprintf("https://github.com/kube-sunset/sunset/releases/download/v1.2.3/sunset_v1.2.3_%s_%s.tar.gz", goos, goarch), pl.URI)
		require.Regexp(t, sha, pl.Sha256)
	}
	require.Equal(t, releasePlatforms, platforms)
}
