package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// krew installs the plugin under its manifest's name and links the
// binary the archive holds as kubectl-<name>: the name the binary knows
// itself by as a plugin. make release writes the manifest (hack/release,
// whose tests check the rest of it).
func TestKrewManifestNamesThePlugin(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/krew/sunset.yaml")
	require.NoError(t, err)
	var p struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Platforms []struct {
				Bin string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &p))
	require.Equal(t, pluginName, "kubectl-"+p.Metadata.Name)
	require.NotEmpty(t, p.Spec.Platforms)
	for _, pl := range p.Spec.Platforms {
		require.Equal(t, "sunset", pl.Bin)
	}
}
