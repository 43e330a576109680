package test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/scan"
)

// The installs with the cluster scan on: the scan overlay and the chart
// with its scan example, which render the same objects.
func scanInstalls(t *testing.T) []*rendered {
	t.Helper()
	kubectl(t)
	return []*rendered{render(t, "kubernetes/overlays/scan"), renderChart(t, "scan.yaml")}
}

// builtinClusterRoles are the rules of the ClusterRoles Kubernetes ships
// that the manifests bind (k8s.io/kubernetes plugin/pkg/auth/authorizer/
// rbac/bootstrappolicy). A binding to any other role the manifests do not
// render fails the test, so that no grant goes unexamined.
var builtinClusterRoles = map[string][]rbacv1.PolicyRule{
	"system:auth-delegator": {
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	},
}

// rbacGrants are a rendered install's roles and bindings, which decide,
// as RBAC does, what a service account may do.
type rbacGrants struct {
	clusterRoles map[string][]rbacv1.PolicyRule
	roles        map[string][]rbacv1.PolicyRule // namespace/name
	bindings     []rbacBinding
}

type rbacBinding struct {
	namespace string // "" for a ClusterRoleBinding
	roleRef   rbacv1.RoleRef
	subjects  []rbacv1.Subject
}

func grantsOf(t *testing.T, r *rendered) rbacGrants {
	t.Helper()
	g := rbacGrants{clusterRoles: maps.Clone(builtinClusterRoles), roles: map[string][]rbacv1.PolicyRule{}}
	for _, obj := range r.raw {
		raw, err := json.Marshal(obj)
		require.NoError(t, err)
		switch obj["kind"] {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			require.NoError(t, json.Unmarshal(raw, &cr))
			require.Nil(t, cr.AggregationRule, "%s: %s aggregates other roles", r.dir, cr.Name)
			g.clusterRoles[cr.Name] = cr.Rules
		case "Role":
			var role rbacv1.Role
			require.NoError(t, json.Unmarshal(raw, &role))
			g.roles[role.Namespace+"/"+role.Name] = role.Rules
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			require.NoError(t, json.Unmarshal(raw, &b))
			g.bindings = append(g.bindings, rbacBinding{roleRef: b.RoleRef, subjects: b.Subjects})
		case "RoleBinding":
			var b rbacv1.RoleBinding
			require.NoError(t, json.Unmarshal(raw, &b))
			g.bindings = append(g.bindings, rbacBinding{namespace: b.Namespace, roleRef: b.RoleRef, subjects: b.Subjects})
		}
	}
	for _, b := range g.bindings {
		var ok bool
		if b.roleRef.Kind == "Role" {
			_, ok = g.roles[b.namespace+"/"+b.roleRef.Name]
		} else {
			_, ok = g.clusterRoles[b.roleRef.Name]
		}
		require.True(t, ok, "%s: a binding to %s %s, which the test does not know", r.dir, b.roleRef.Kind, b.roleRef.Name)
	}
	return g
}

// bindsServiceAccount reports whether subject s names the service account
// namespace/name, alone or through its groups.
func bindsServiceAccount(s rbacv1.Subject, namespace, name string) bool {
	switch s.Kind {
	case "ServiceAccount":
		return s.Namespace == namespace && s.Name == name
	case "User":
		return s.Name == "system:serviceaccount:"+namespace+":"+name
	case "Group":
		return s.Name == "system:serviceaccounts" || s.Name == "system:serviceaccounts:"+namespace || s.Name == "system:authenticated"
	}
	return false
}

// allows is RBAC's decision for the service account namespace/name; a
// Namespace of "" in a is a request across all namespaces, which only a
// ClusterRoleBinding grants.
func (g rbacGrants) allows(namespace, name string, a authzv1.ResourceAttributes) bool {
	for _, b := range g.bindings {
		if b.namespace != "" && b.namespace != a.Namespace {
			continue
		}
		if !slices.ContainsFunc(b.subjects, func(s rbacv1.Subject) bool { return bindsServiceAccount(s, namespace, name) }) {
			continue
		}
		rules := g.clusterRoles[b.roleRef.Name]
		if b.roleRef.Kind == "Role" {
			rules = g.roles[b.namespace+"/"+b.roleRef.Name]
		}
		if slices.ContainsFunc(rules, func(rule rbacv1.PolicyRule) bool { return ruleAllows(rule, &a) }) {
			return true
		}
	}
	return false
}

// serviceAccounts are every service account a rendered install creates
// or binds, as namespace/name.
func (g rbacGrants) serviceAccounts(r *rendered) []string {
	var out []string
	for _, obj := range r.raw {
		if obj["kind"] == "ServiceAccount" {
			meta := obj["metadata"].(map[string]any)
			out = append(out, meta["namespace"].(string)+"/"+meta["name"].(string))
		}
	}
	for _, b := range g.bindings {
		for _, s := range b.subjects {
			if s.Kind == "ServiceAccount" {
				out = append(out, s.Namespace+"/"+s.Name)
			}
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// mayReadSecrets lists the service accounts allowed the Secret request a.
func (g rbacGrants) mayReadSecrets(r *rendered, a authzv1.ResourceAttributes) []string {
	a.Resource, a.Version = "secrets", "v1"
	var out []string
	for _, sa := range g.serviceAccounts(r) {
		ns, name, _ := strings.Cut(sa, "/")
		if g.allows(ns, name, a) {
			out = append(out, sa)
		}
	}
	return out
}

// scanner is the rendered cluster scan's own workload.
type scanner struct {
	cronJob batchv1.CronJob
	sa      corev1.ServiceAccount
	np      networkingv1.NetworkPolicy
	results corev1.ConfigMap
}

// scannerOf decodes the scan's own objects, strictly; the install must
// have exactly one of each.
func scannerOf(t *testing.T, r *rendered) scanner {
	t.Helper()
	var s scanner
	seen := map[string]int{}
	for _, obj := range r.raw {
		if !isScanner(obj) {
			continue
		}
		kind := obj["kind"].(string)
		into := map[string]any{"CronJob": &s.cronJob, "ServiceAccount": &s.sa, "NetworkPolicy": &s.np, "ConfigMap": &s.results}[kind]
		if into == nil {
			continue
		}
		seen[kind]++
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, into, true), "%s: %s", r.dir, kind)
	}
	require.Equal(t, map[string]int{"CronJob": 1, "ServiceAccount": 1, "NetworkPolicy": 1, "ConfigMap": 1}, seen, r.dir)
	return s
}

// Secrets, which hold Helm's releases and their values, may be listed by
// the cluster scan's own service account only, and read by none but
// Sunset's own CA Secret: the service account of the StatefulSet, which
// takes the audit webhook and Kafka's messages, is refused list and get on
// every other Secret, in every namespace and across them, in every
// kustomization and with every example of the chart.
func TestScanSecretsAreListedByTheScannerOnly(t *testing.T) {
	kubectl(t)
	var installs []*rendered
	for _, dir := range kustomizations(t) {
		installs = append(installs, render(t, dir))
	}
	for example := range chartExamples {
		installs = append(installs, renderChart(t, example))
	}
	namespaces := []string{"", "default", "kube-system", "sunset"}
	for _, r := range installs {
		g := grantsOf(t, r)
		webhookSA := r.sts.Namespace + "/" + r.sts.Spec.Template.Spec.ServiceAccountName
		var want []string
		if slices.ContainsFunc(r.raw, isScanner) {
			s := scannerOf(t, r)
			want = []string{s.sa.Namespace + "/" + s.sa.Name}
			require.NotEqual(t, webhookSA, want[0], "%s: the scan runs as Sunset's own service account", r.dir)
		}
		for _, ns := range namespaces {
			for _, verb := range []string{"list", "watch"} {
				got := g.mayReadSecrets(r, authzv1.ResourceAttributes{Namespace: ns, Verb: verb})
				if verb == "watch" {
					require.Empty(t, got, "%s: may watch Secrets in %q", r.dir, ns)
					continue
				}
				require.Equal(t, want, got, "%s: who may list Secrets in %q (\"\": all namespaces)", r.dir, ns)
				require.NotContains(t, got, webhookSA, r.dir)
			}
			if ns == "" {
				continue
			}
			// A Helm release's record, and any other Secret but Sunset's CA.
			for _, name := range []string{"sh.helm.release.v1.app.v1", "sunset-webhook-tokens", "sunset-kafka", "sunset-tls"} {
				require.Empty(t, g.mayReadSecrets(r, authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Name: name}),
					"%s: who may get Secret %s/%s", r.dir, ns, name)
			}
		}
	}
}

// The scan overlay and the chart's scan run the cluster scan in a CronJob
// of its own, as a service account of its own, that listens on nothing
// and whose NetworkPolicy admits nothing in and lets out only DNS and
// kube-apiserver; it publishes each scan in a ConfigMap, which Sunset,
// pointed at it by scan.configMap, may only get.
func TestScanRunsApartFromTheWebhook(t *testing.T) {
	for _, r := range scanInstalls(t) {
		dir := r.dir
		s := scannerOf(t, r)
		g := grantsOf(t, r)

		// Sunset reads the scan from the ConfigMap, and scans nothing.
		ref, ok := stsEnv(r, "SUNSET_SCAN_CONFIGMAP")
		require.True(t, ok, "%s: Sunset reads the published scan (scan.configMap)", dir)
		require.Empty(t, scanInterval(t, r), "%s: Sunset scans in its own pod", dir)
		ns, name, err := config.ParseConfigMapRef(ref)
		require.NoError(t, err, dir)
		require.Equal(t, s.results.Namespace+"/"+s.results.Name, ns+"/"+name, "%s: Sunset reads the ConfigMap that is rendered", dir)
		require.Empty(t, s.results.Data, "%s: the ConfigMap is created empty; the scanner fills it", dir)
		require.Empty(t, s.results.BinaryData, dir)

		// The CronJob: its own service account, the publishing command,
		// the same ConfigMap, no ports, hardened, one scan at a time.
		job := s.cronJob.Spec.JobTemplate.Spec.Template.Spec
		require.Equal(t, s.sa.Name, job.ServiceAccountName, dir)
		require.Equal(t, s.sa.Namespace, s.cronJob.Namespace, dir)
		require.Equal(t, ptrTo(true), job.AutomountServiceAccountToken, "%s: the scan reads the cluster with its token", dir)
		require.Equal(t, ptrTo(false), s.sa.AutomountServiceAccountToken, "%s: only the scanner's pods mount its token", dir)
		require.Equal(t, batchv1.ForbidConcurrent, s.cronJob.Spec.ConcurrencyPolicy, dir)
		require.Equal(t, corev1.RestartPolicyNever, job.RestartPolicy, dir)
		require.Len(t, job.Containers, 1, dir)
		c := job.Containers[0]
		require.Equal(t, r.sts.Spec.Template.Spec.Containers[0].Image, c.Image, "%s: the scanner runs Sunset's image", dir)
		require.Equal(t, []string{"/usr/local/bin/sunset", "publish-scan"}, c.Command, dir)
		require.Empty(t, c.Ports, "%s: the scanner listens on nothing", dir)
		require.Nil(t, c.LivenessProbe, dir)
		require.Nil(t, c.ReadinessProbe, dir)
		var published string
		for _, e := range c.Env {
			if e.Name == "SUNSET_SCAN_CONFIGMAP" {
				published = e.Value
			}
			require.Nil(t, e.ValueFrom, "%s: the scanner reads no Secret", dir)
		}
		require.Equal(t, ref, published, "%s: the scanner publishes where Sunset reads", dir)
		for _, v := range job.Volumes {
			require.Nil(t, v.Secret, "%s: the scanner mounts no Secret", dir)
			require.NotNil(t, v.ConfigMap, dir)
			require.Equal(t, r.cm.Name, v.ConfigMap.Name, "%s: Sunset's config file, for catalog.extra and fieldRules", dir)
		}
		requireHardened(t, dir+" scanner", job.SecurityContext, c.SecurityContext)

		// Only the scanner's pods are selected by its NetworkPolicy, and
		// none of them by Sunset's Service or NetworkPolicy.
		pod := labels.Set(s.cronJob.Spec.JobTemplate.Spec.Template.Labels)
		sel := func(ls map[string]string) labels.Selector { return labels.SelectorFromSet(ls) }
		require.True(t, sel(s.np.Spec.PodSelector.MatchLabels).Matches(pod), "%s: the scanner's NetworkPolicy selects its pods", dir)
		require.Empty(t, s.np.Spec.PodSelector.MatchExpressions, dir)
		require.False(t, sel(s.np.Spec.PodSelector.MatchLabels).Matches(labels.Set(r.sts.Spec.Template.Labels)), "%s: the scanner's NetworkPolicy selects Sunset", dir)
		require.False(t, sel(r.np.Spec.PodSelector.MatchLabels).Matches(pod), "%s: Sunset's NetworkPolicy admits traffic to the scanner", dir)
		require.False(t, sel(r.svc.Spec.Selector).Matches(pod), "%s: Sunset's Service sends traffic to the scanner", dir)

		// Nothing in; out, DNS and kube-apiserver at Sunset's addresses.
		require.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, s.np.Spec.PolicyTypes, dir)
		require.Empty(t, s.np.Spec.Ingress, "%s: the scanner takes no network input", dir)
		wantEgress := []networkingv1.NetworkPolicyEgressRule{r.np.Spec.Egress[0]}
		var apiserver networkingv1.NetworkPolicyEgressRule
		for _, rule := range r.np.Spec.Egress {
			if len(rule.To) > 0 && rule.To[0].IPBlock != nil {
				apiserver = rule
			}
		}
		require.Equal(t, controlPlaneCIDRs(t, r.np), func() []string {
			var out []string
			for _, p := range apiserver.To {
				out = append(out, p.IPBlock.CIDR)
			}
			return out
		}(), dir)
		wantEgress = append(wantEgress, apiserver)
		require.Equal(t, wantEgress, s.np.Spec.Egress, "%s: the scanner reaches DNS and kube-apiserver only", dir)

		// Who may do what with the ConfigMap: the scanner writes it, Sunset
		// only reads it.
		webhookSA := r.sts.Spec.Template.Spec.ServiceAccountName
		cm := func(verb string) authzv1.ResourceAttributes {
			return authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Version: "v1", Resource: "configmaps", Name: name}
		}
		require.True(t, g.allows(ns, webhookSA, cm("get")), "%s: Sunset may get the published scan", dir)
		for _, verb := range []string{"update", "patch", "delete"} {
			require.False(t, g.allows(ns, webhookSA, cm(verb)), "%s: Sunset may %s the published scan", dir, verb)
		}
		require.True(t, g.allows(s.sa.Namespace, s.sa.Name, cm("get")), dir)
		require.True(t, g.allows(s.sa.Namespace, s.sa.Name, cm("update")), dir)
		require.False(t, g.allows(s.sa.Namespace, s.sa.Name, authzv1.ResourceAttributes{Namespace: ns, Verb: "create", Version: "v1", Resource: "configmaps"}),
			"%s: the scanner may create ConfigMaps", dir)

		// The scanner may list what the scan lists, across namespaces.
		for _, gvr := range scan.ClusterReads {
			require.True(t, g.allows(s.sa.Namespace, s.sa.Name, authzv1.ResourceAttributes{Verb: "list", Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}),
				"%s: the scanner may not list %s", dir, gvr.Resource)
			require.False(t, g.allows(r.sts.Namespace, webhookSA, authzv1.ResourceAttributes{Verb: "list", Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}),
				"%s: Sunset may list %s", dir, gvr.Resource)
		}
	}
}
