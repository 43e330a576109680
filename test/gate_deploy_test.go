package test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/gate"
	"github.com/kube-sunset/sunset/gate/admit"
	"github.com/kube-sunset/sunset/gate/capihook"
)

const gateOverlay = "kubernetes/overlays/gate"

// gateKind is a kind whose Kubernetes version the gate reads out of the
// box (docs/gate.md#kinds): its API group, resource and kind, and the
// field that holds the version.
type gateKind struct {
	group, resource, kind string
	path                  []string
}

// gateResources are the resources of the gate's built-in kinds, which
// the webhook's rules name.
var gateResources = map[[2]string]string{
	{"cluster.x-k8s.io", "Cluster"}:                          "clusters",
	{"controlplane.cluster.x-k8s.io", "KubeadmControlPlane"}: "kubeadmcontrolplanes",
	{"eks.services.k8s.aws", "Cluster"}:                      "clusters",
	{"containerservice.azure.com", "ManagedCluster"}:         "managedclusters",
	{"container.cnrm.cloud.google.com", "ContainerCluster"}:  "containerclusters",
	{"eks.aws.upbound.io", "Cluster"}:                        "clusters",
	{"provisioning.cattle.io", "Cluster"}:                    "clusters",
}

// builtinGateKinds are the gate's built-in kinds, from its code, each with
// its resource.
func builtinGateKinds(t *testing.T) []gateKind {
	t.Helper()
	var out []gateKind
	for _, k := range gate.BuiltinKinds() {
		resource, ok := gateResources[[2]string{k.Group, k.Kind}]
		require.True(t, ok, "the resource of %s.%s", k.Kind, k.Group)
		out = append(out, gateKind{k.Group, resource, k.Kind, strings.Split(k.Path, ".")})
	}
	require.Len(t, out, len(gateResources), "every kind here is built in")
	return out
}

// extensionConfig is the part of Cluster API's ExtensionConfig
// (runtime.cluster.x-k8s.io/v1beta2) the gate's overlay sets.
type extensionConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		ClientConfig struct {
			Service *struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
				Path      string `json:"path"`
				Port      int32  `json:"port"`
			} `json:"service"`
			URL      string `json:"url"`
			CABundle string `json:"caBundle"`
		} `json:"clientConfig"`
	} `json:"spec"`
}

// gateObjects are the rendered gate's ValidatingWebhookConfiguration and
// ExtensionConfig, decoded strictly.
func gateObjects(t *testing.T, r *rendered) (admissionregistrationv1.ValidatingWebhookConfiguration, extensionConfig) {
	t.Helper()
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	var ext extensionConfig
	found := map[string]int{}
	for _, obj := range r.raw {
		kind, _ := obj["kind"].(string)
		raw, err := json.Marshal(obj)
		require.NoError(t, err)
		switch kind {
		case "ValidatingWebhookConfiguration":
			require.NoError(t, yaml.UnmarshalStrict(raw, &vwc), r.dir)
		case "ExtensionConfig":
			require.NoError(t, yaml.UnmarshalStrict(raw, &ext), r.dir)
		default:
			continue
		}
		found[kind]++
	}
	require.Equal(t, map[string]int{"ValidatingWebhookConfiguration": 1, "ExtensionConfig": 1}, found, r.dir)
	return vwc, ext
}

// requireGateObjects checks the gate's objects of a rendered install
// against its Service and the CA it publishes, with the failure policy
// wanted.
func requireGateObjects(t *testing.T, r *rendered, failurePolicy admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	dir := r.dir
	vwc, ext := gateObjects(t, r)
	require.Len(t, vwc.Webhooks, 1, dir)
	w := vwc.Webhooks[0]
	require.Equal(t, "gate.sunset.dev", w.Name, dir)
	require.Equal(t, ptrTo(admissionregistrationv1.Equivalent), w.MatchPolicy, dir)
	require.Equal(t, ptrTo(admissionregistrationv1.SideEffectClassNoneOnDryRun), w.SideEffects, dir)
	require.Equal(t, []string{"v1"}, w.AdmissionReviewVersions, dir)
	require.Equal(t, ptrTo(failurePolicy), w.FailurePolicy, dir)
	require.NotNil(t, w.TimeoutSeconds, dir)
	require.LessOrEqual(t, *w.TimeoutSeconds, int32(10), "%s: kube-apiserver's request waits for the gate", dir)
	require.Positive(t, *w.TimeoutSeconds, dir)
	require.Nil(t, w.NamespaceSelector, "%s: every namespace's clusters", dir)
	require.Nil(t, w.ObjectSelector, dir)

	// UPDATE of each built-in kind, in every version of its API, and
	// nothing else: one rule per group, so that no group's resource
	// name matches another group's kind.
	var want []admissionregistrationv1.RuleWithOperations
	for _, k := range builtinGateKinds(t) {
		want = append(want, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{k.group}, APIVersions: []string{"*"}, Resources: []string{k.resource}},
		})
	}
	require.Equal(t, want, w.Rules, dir)

	// Both reach Sunset through its Service, on the port it serves.
	require.Nil(t, w.ClientConfig.URL, dir)
	require.NotNil(t, w.ClientConfig.Service, dir)
	svc := w.ClientConfig.Service
	require.Len(t, r.svc.Spec.Ports, 1, dir)
	require.Equal(t, admissionregistrationv1.ServiceReference{Name: r.svc.Name, Namespace: r.svc.Namespace,
		Path: ptrTo(admit.Path), Port: ptrTo(r.svc.Spec.Ports[0].Port)}, *svc, dir)
	require.Equal(t, "runtime.cluster.x-k8s.io/v1beta2", ext.APIVersion, dir)
	require.Equal(t, "sunset-gate", ext.Metadata.Name, dir)
	require.NotNil(t, ext.Spec.ClientConfig.Service, dir)
	require.Empty(t, ext.Spec.ClientConfig.URL, dir)
	es := ext.Spec.ClientConfig.Service
	require.Equal(t, []any{r.svc.Name, r.svc.Namespace, capihook.Prefix, r.svc.Spec.Ports[0].Port},
		[]any{es.Name, es.Namespace, es.Path, es.Port}, dir)

	// Both trust the CA Sunset publishes, as the APIService does: no
	// caBundle is written here, the injectors fill it.
	publish := requireRealFlags(t, serveFlags(t), r.sts.Spec.Template.Spec.Containers[0].Args)["publish-ca-secret"]
	require.NotEmpty(t, publish, "%s: Sunset publishes its CA", dir)
	require.Empty(t, w.ClientConfig.CABundle, dir)
	require.Empty(t, ext.Spec.ClientConfig.CABundle, dir)
	require.Equal(t, map[string]string{"cert-manager.io/inject-ca-from-secret": publish}, vwc.Annotations, dir)
	require.Equal(t, map[string]string{"runtime.cluster.x-k8s.io/inject-ca-from-secret": publish}, ext.Metadata.Annotations, dir)
	// The serving certificate names the Service as both callers verify it.
	require.Contains(t, strings.Split(requireRealFlags(t, serveFlags(t), r.sts.Spec.Template.Spec.Containers[0].Args)["cert-hosts"], ","),
		r.svc.Name+"."+r.svc.Namespace+".svc", dir)

	// And Sunset's config turns the gate on.
	gate, ok := sunsetConfig(t, r)["gate"].(map[string]any)
	require.True(t, ok, "%s: the config file has gate keys", dir)
	require.Equal(t, true, gate["enabled"], dir)
}

// The gate's overlay: the base, the gate's config, its webhook and Cluster
// API's ExtensionConfig, each pointing at the base's Service and trusting
// the CA Sunset publishes.
func TestKustomizeGateOverlay(t *testing.T) {
	kubectl(t)
	r := render(t, gateOverlay)
	requireGateObjects(t, r, admissionregistrationv1.Ignore)
	cfg := sunsetConfig(t, r)
	delete(cfg, "gate")
	require.Equal(t, sunsetConfig(t, render(t, "kubernetes/base")), cfg, "overlays/gate/config.yaml is the base's config.yaml plus gate keys")
}

// The chart's gate is the overlay's (TestHelmChartRendersWhatKustomizeRenders
// compares them whole), off by default, and takes Fail when asked.
func TestHelmChartGate(t *testing.T) {
	kubectl(t)
	requireGateObjects(t, renderChart(t, "gate.yaml"), admissionregistrationv1.Ignore)
	out, err := helmRender(t, map[string]any{"gate": map[string]any{"enabled": true, "failurePolicy": "Fail"}})
	require.NoError(t, err)
	requireGateObjects(t, decodeRendered(t, "helm gate.failurePolicy=Fail", out), admissionregistrationv1.Fail)

	out, err = helmRender(t, map[string]any{"gate": map[string]any{"enabled": true, "clusterAPI": false}})
	require.NoError(t, err)
	var kinds []string
	for _, obj := range decodeRendered(t, "helm gate.clusterAPI=false", out).raw {
		kinds = append(kinds, obj["kind"].(string))
	}
	require.Contains(t, kinds, "ValidatingWebhookConfiguration")
	require.NotContains(t, kinds, "ExtensionConfig")

	def := renderChart(t, "default.yaml")
	for _, obj := range def.raw {
		require.NotContains(t, []string{"ValidatingWebhookConfiguration", "ExtensionConfig"}, obj["kind"], "the gate is off by default")
	}
	require.NotContains(t, sunsetConfig(t, def), "gate")

	for _, tc := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"gate": map[string]any{"failurePolicy": "Closed"}}, "at '/gate/failurePolicy'"},
		{map[string]any{"gate": map[string]any{"timeoutSeconds": 30}}, "at '/gate/timeoutSeconds'"},
		{map[string]any{"gate": map[string]any{"enabled": true}, "tls": map[string]any{"publishCA": false}},
			"gate.enabled with tls.publishCA off: set gate.caBundle"},
	} {
		_, err := helmRender(t, tc.vals)
		require.ErrorContains(t, err, tc.want)
	}
}

// The chart's notes, with the gate on, say how to give the webhook
// Sunset's CA without cert-manager: docs/gate.md's command, as written.
func TestHelmChartGateNotes(t *testing.T) {
	r, err := helmInstall(t, map[string]any{"gate": map[string]any{"enabled": true}})
	require.NoError(t, err)
	page, err := os.ReadFile(gateDoc)
	require.NoError(t, err)
	command := regexp.MustCompile(`(?m)^kubectl patch validatingwebhookconfiguration sunset-gate [^\n]*\\\n[^\n]+$`).Find(page)
	require.NotNil(t, command, "%s has the command that fills the webhook's caBundle", gateDoc)
	var notes []string
	for _, line := range strings.Split(r.Info.Notes, "\n") {
		notes = append(notes, strings.TrimSpace(line))
	}
	lines := strings.Split(string(command), "\n")
	require.Contains(t, strings.Join(notes, "\n"), strings.TrimSpace(lines[0])+"\n"+strings.TrimSpace(lines[1]))
}
