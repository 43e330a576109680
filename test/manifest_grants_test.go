package test

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/selfsigned"
	"github.com/kube-sunset/sunset/scan"
)

// requireOnlyNeededGrants checks the RBAC objects of a rendered install
// (TestKustomizeGrantsOnlyDelegation).
func requireOnlyNeededGrants(t *testing.T, r *rendered) {
	t.Helper()
	dir := r.dir
	type rule struct {
		APIGroups     []string `json:"apiGroups"`
		Resources     []string `json:"resources"`
		ResourceNames []string `json:"resourceNames"`
		Verbs         []string `json:"verbs"`
	}
	wantRules := map[string][]rule{
		"sunset:extension-apiserver-authentication-reader": {{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{"extension-apiserver-authentication"}, Verbs: []string{"get", "list", "watch"}}},
		"sunset:view": {{APIGroups: []string{"sunset.dev"}, Resources: []string{"apirequestcounts", "fieldrequestcounts", "webhookcounts", "upgradechecks", "serverinfo"},
			Verbs: []string{"get", "list"}}},
		"sunset:reset": {{APIGroups: []string{"sunset.dev"}, Resources: []string{"apirequestcounts"}, Verbs: []string{"delete"}}},
	}
	wantAggregation := map[string][]string{
		"sunset:view":  {"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-view"},
		"sunset:reset": {"rbac.authorization.k8s.io/aggregate-to-admin"},
	}
	wantBindings := map[string]string{
		"sunset:system:auth-delegator":                     "ClusterRole/system:auth-delegator",
		"sunset:extension-apiserver-authentication-reader": "ClusterRole/sunset:extension-apiserver-authentication-reader",
	}
	// Each binding's one subject: Sunset's ServiceAccount unless said here.
	subjects := map[string]string{}
	// Publishing the CA: the rules the publisher's requests need, in the
	// Secret's namespace, and nothing where Sunset publishes nothing.
	wantRoles := map[string][]rbacv1.PolicyRule{}
	publish := requireRealFlags(t, serveFlags(t), r.sts.Spec.Template.Spec.Containers[0].Args)["publish-ca-secret"]
	if publish != "" {
		ref, err := selfsigned.ParseSecretRef(publish)
		require.NoError(t, err, dir)
		require.Equal(t, r.sts.Namespace, ref.Namespace, "%s: the Secret is in Sunset's namespace", dir)
		wantRoles["sunset-ca-publisher"] = caPublisherRules(t, ref)
		wantBindings["sunset-ca-publisher"] = "Role/sunset-ca-publisher"
	}
	// Sunset never scans in its own pod, which takes the webhook: the
	// scan's list on Secrets is never Sunset's.
	require.Empty(t, scanInterval(t, r), "%s: Sunset scans the cluster itself", dir)
	// The cluster scan, where it is on, runs as its own ServiceAccount
	// with list on what it lists, and get and update on the ConfigMap it
	// publishes in, of which Sunset gets get only (the verbs
	// scan.Publish and scan.ReadPublished use, scan/periodic_test.go).
	if ref, ok := stsEnv(r, "SUNSET_SCAN_CONFIGMAP"); ok {
		ns, cm, err := config.ParseConfigMapRef(ref)
		require.NoError(t, err, dir)
		require.Equal(t, r.sts.Namespace, ns, "%s: the scan's ConfigMap is in Sunset's namespace", dir)
		var rules []rule
		for _, gvr := range scan.ClusterReads {
			i := slices.IndexFunc(rules, func(r rule) bool { return r.APIGroups[0] == gvr.Group })
			if i < 0 {
				rules = append(rules, rule{APIGroups: []string{gvr.Group}, Verbs: []string{"list"}})
				i = len(rules) - 1
			}
			rules[i].Resources = append(rules[i].Resources, gvr.Resource)
		}
		wantRules["sunset-scanner"] = rules
		wantBindings["sunset-scanner"] = "ClusterRole/sunset-scanner"
		subjects["sunset-scanner"] = "sunset-scanner"
		wantRoles["sunset-scan-publisher"] = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cm}, Verbs: []string{"get", "update"}}}
		wantBindings["sunset-scan-publisher"] = "Role/sunset-scan-publisher"
		subjects["sunset-scan-publisher"] = "sunset-scanner"
		wantRoles["sunset-scan-reader"] = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cm}, Verbs: []string{"get"}}}
		wantBindings["sunset-scan-reader"] = "Role/sunset-scan-reader"
	}
	gotRoles := map[string][]rbacv1.PolicyRule{}
	var gotBindings []string
	for _, obj := range r.raw {
		raw, err := json.Marshal(obj)
		require.NoError(t, err)
		meta := obj["metadata"].(map[string]any)
		name := meta["name"].(string)
		switch obj["kind"] {
		case "Role":
			var role rbacv1.Role
			require.NoError(t, json.Unmarshal(raw, &role))
			require.Equal(t, r.sts.Namespace, role.Namespace, dir)
			gotRoles[name] = role.Rules
		case "ClusterRole":
			var cr struct {
				Rules []rule `json:"rules"`
			}
			require.NoError(t, json.Unmarshal(raw, &cr))
			require.Equal(t, wantRules[name], cr.Rules, "%s: %s", dir, name)
			var agg []string
			for k := range meta["labels"].(map[string]any) {
				if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
					agg = append(agg, k)
				}
			}
			sort.Strings(agg)
			require.Equal(t, wantAggregation[name], agg, "%s: %s", dir, name)
		case "ClusterRoleBinding", "RoleBinding":
			var b struct {
				RoleRef  struct{ Kind, Name string } `json:"roleRef"`
				Subjects []struct{ Kind, Name, Namespace string }
			}
			require.NoError(t, json.Unmarshal(raw, &b))
			require.Equal(t, wantBindings[name], b.RoleRef.Kind+"/"+b.RoleRef.Name, "%s: %s", dir, name)
			require.Len(t, b.Subjects, 1)
			sa := r.sa.Name
			if s, ok := subjects[name]; ok {
				sa = s
			}
			require.Equal(t, struct{ Kind, Name, Namespace string }{"ServiceAccount", sa, r.sa.Namespace}, b.Subjects[0], "%s: %s", dir, name)
			require.Equal(t, r.sts.Spec.Template.Spec.ServiceAccountName, r.sa.Name, dir)
			gotBindings = append(gotBindings, name)
		}
	}
	require.Equal(t, wantRoles, gotRoles, "%s: the Roles Sunset's requests need", dir)
	require.ElementsMatch(t, slices.Collect(maps.Keys(wantBindings)), gotBindings, "%s: bindings", dir)
}
