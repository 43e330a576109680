package scan_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan"
)

func TestServedAPIVersions(t *testing.T) {
	cat, err := catalog.New([]catalog.Entry{{Group: "example.com", Version: "v1beta1", Resource: "widgets", Kind: "Widget", IntroducedIn: "1.20", RemovedIn: "1.30"}})
	require.NoError(t, err)
	probes := []string{
		"apps/v1", "apps/v1/Deployment", "extensions/v1beta1", "extensions/v1beta1/Ingress", "extensions/v1beta1/Deployment",
		"policy/v1beta1", "policy/v1beta1/PodSecurityPolicy", "policy/v1beta1/Eviction", "batch/v1beta1/CronJob",
		"apiregistration.k8s.io/v1", "apiextensions.k8s.io/v1/CustomResourceDefinition", "example.com/v1beta1/Widget",
		"v1", "v1/Pod", "v1/PodList", "v1/DeleteOptions",
	}
	for _, tc := range []struct {
		target string
		want   []string
	}{
		{"1.15", []string{"apps/v1", "apps/v1/Deployment", "extensions/v1beta1", "extensions/v1beta1/Ingress", "extensions/v1beta1/Deployment",
			"policy/v1beta1", "policy/v1beta1/PodSecurityPolicy", "policy/v1beta1/Eviction", "batch/v1beta1/CronJob",
			"apiregistration.k8s.io/v1", "v1", "v1/Pod"}},
		{"1.21", []string{"apps/v1", "apps/v1/Deployment", "extensions/v1beta1", "extensions/v1beta1/Ingress",
			"policy/v1beta1", "policy/v1beta1/PodSecurityPolicy", "policy/v1beta1/Eviction", "batch/v1beta1/CronJob",
			"apiregistration.k8s.io/v1", "apiextensions.k8s.io/v1/CustomResourceDefinition", "example.com/v1beta1/Widget", "v1", "v1/Pod"}},
		{"1.25", []string{"apps/v1", "apps/v1/Deployment", "apiregistration.k8s.io/v1", "apiextensions.k8s.io/v1/CustomResourceDefinition",
			"example.com/v1beta1/Widget", "v1", "v1/Pod"}},
		{"1.37", []string{"apps/v1", "apps/v1/Deployment", "apiregistration.k8s.io/v1", "apiextensions.k8s.io/v1/CustomResourceDefinition", "v1", "v1/Pod"}},
	} {
		t.Run(tc.target, func(t *testing.T) {
			served := scan.ServedAPIVersions(cat, catalog.MustParseRelease(tc.target))
			require.True(t, slices.IsSorted(served))
			var got []string
			for _, p := range probes {
				if slices.Contains(served, p) {
					got = append(got, p)
				}
			}
			require.Equal(t, tc.want, got, tc.target)
		})
	}
}
