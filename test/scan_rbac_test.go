package test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-sunset/sunset/scan"
)

// The scan overlay's role grants list on exactly what a cluster scan lists
// (scan.ClusterReads), no more, and binds it to Sunset's service account;
// the overlay turns the scan on.
func TestScanOverlayGrantsWhatTheScanLists(t *testing.T) {
	r := render(t, "kubernetes/overlays/scan")
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	for _, obj := range r.raw {
		switch obj["kind"] {
		case "ClusterRole":
			if obj["metadata"].(map[string]any)["name"] == "sunset-scanner" {
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &role))
			}
		case "ClusterRoleBinding":
			if obj["metadata"].(map[string]any)["name"] == "sunset-scanner" {
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &binding))
			}
		}
	}
	var granted []string
	for _, rule := range role.Rules {
		require.Equal(t, []string{"list"}, rule.Verbs, "the scan only lists")
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				granted = append(granted, res+"."+g)
			}
		}
	}
	var want []string
	for _, gvr := range scan.ClusterReads {
		want = append(want, gvr.Resource+"."+gvr.Group)
	}
	slices.Sort(granted)
	slices.Sort(want)
	require.Equal(t, want, granted)
	require.Equal(t, "sunset-scanner", binding.RoleRef.Name)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: r.sa.Name, Namespace: r.sa.Namespace}}, binding.Subjects)

	var interval string
	for _, e := range r.sts.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "SUNSET_SCAN_INTERVAL" {
			interval = e.Value
		}
	}
	require.Equal(t, "15m", interval)
}
