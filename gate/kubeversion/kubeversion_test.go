package kubeversion

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
)

func TestParseSpellings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
	}{
		{"v1.31.2", Version{1, 31, 2}},
		{"1.31.2", Version{1, 31, 2}},
		{"1.31", Version{1, 31, -1}},
		{"v1.31", Version{1, 31, -1}},
		{"1.31.2-eks-1234567", Version{1, 31, 2}},
		{"1.31-eks-1234567", Version{1, 31, -1}},
		{"1.31.2-gke.1000", Version{1, 31, 2}},
		{"v1.28.9+rke2r1", Version{1, 28, 9}},
		{"v1.28.9+k3s1", Version{1, 28, 9}},
		{"v1.30.0-rc.1", Version{1, 30, 0}},
		{"1.9.10", Version{1, 9, 10}},
		{"2.0.0", Version{2, 0, 0}},
	} {
		got, err := Parse(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{"", "1", "v1", "latest", "1.x", "1.31.x", "1.31.2.3", "0.31", "v.1.31", "1..31", "1.31-", "1.31+",
		"+1.31", "1.+31", "1.-1", " 1.31", "1.31 ", "v1.31.2-" + strings.Repeat("a", 60), "1.1234567"} {
		_, err := Parse(in)
		require.Error(t, err, in)
	}
	_, err := Parse("latest")
	require.EqualError(t, err, `"latest" is not a Kubernetes version such as v1.31.2 or 1.31`)
}

func TestRaisesMinor(t *testing.T) {
	must := func(s string) Version {
		v, err := Parse(s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		from, to string
		raises   bool
	}{
		{"v1.36.3", "v1.37.0", true},
		{"1.34", "1.37", true},
		{"v1.31.2", "1.32.0-eks-1", true},
		{"1.40.0", "2.0.0", true},
		{"v1.36.3", "v1.36.4", false}, // a patch release
		{"v1.36.3", "1.36-gke.5", false},
		{"v1.37.0", "v1.36.9", false}, // a downgrade
		{"1.36", "1.36", false},
	} {
		require.Equal(t, tc.raises, must(tc.from).RaisesMinor(must(tc.to)), "%s → %s", tc.from, tc.to)
	}
	require.Equal(t, catalog.Release{Major: 1, Minor: 37}, must("v1.37.0+rke2r1").Release())
	require.Equal(t, "1.37.0", must("v1.37.0+rke2r1").String())
	require.Equal(t, "1.37", must("v1.37").String())
}
