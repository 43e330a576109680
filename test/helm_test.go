package test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	yamlv3 "go.yaml.in/yaml/v3"
	"helm.sh/helm/v4/pkg/action"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/internal/testutil/golden"
)

const (
	chartDir = "../deploy/helm/sunset"
	// The release the comparisons install: its name and namespace are the
	// ones the kustomizations write.
	helmRelease   = "sunset"
	helmNamespace = "sunset"
	// helmKubeVersion is the cluster a client-only render assumes.
	helmKubeVersion = "v1.36.0"
)

// chartExamples are the example values files and the kustomize output the
// chart renders the same as with each: a directory under deploy/, or an
// overlay the test writes (kustomizeOverlays) for setups deploy/kubernetes
// has no overlay of.
var chartExamples = map[string]string{
	"default.yaml": "kubernetes/base",
	"tls.yaml":     "kubernetes/overlays/tls",
	"kafka.yaml":   "kubernetes/overlays/kafka",
	"fleet.yaml":   "fleet",
	"eks.yaml":     "eks",
	"gke.yaml":     "gke",
	"scan.yaml":    "kubernetes/overlays/scan",
	"gate.yaml":    gateOverlay,
}

// helmRender renders the chart as `helm install --dry-run=client` does,
// with the given values, for release sunset in namespace sunset.
func helmRender(t *testing.T, vals map[string]any) ([]byte, error) {
	t.Helper()
	r, err := helmInstall(t, vals)
	if err != nil {
		return nil, err
	}
	require.Empty(t, r.Hooks, "the chart has no hooks: everything is in the manifest")
	return []byte(r.Manifest), nil
}

// helmInstall installs the chart as helm install --dry-run=client does,
// with the given values, for release sunset in namespace sunset.
func helmInstall(t *testing.T, vals map[string]any) (*releasev1.Release, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.DiscardHandler)
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName, install.Namespace = helmRelease, helmNamespace
	install.KubeVersion, err = chartcommon.ParseKubeVersion(helmKubeVersion)
	require.NoError(t, err)
	rel, err := install.RunWithContext(context.Background(), ch, vals)
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*releasev1.Release)
	require.True(t, ok, "a release of type %T", rel)
	return r, nil
}

// exampleValues reads an example values file as Helm's -f does.
func exampleValues(t *testing.T, name string) map[string]any {
	t.Helper()
	vals, err := (&values.Options{ValueFiles: []string{filepath.Join(chartDir, "examples", name)}}).MergeValues(getter.Providers{})
	require.NoError(t, err, name)
	return vals
}

// renderChart renders the chart with an example's values, decoded as the
// kustomize tests decode a kustomization.
func renderChart(t *testing.T, example string) *rendered {
	t.Helper()
	out, err := helmRender(t, exampleValues(t, example))
	require.NoError(t, err, "rendering the chart with %s", example)
	return decodeRendered(t, "helm "+example, out)
}

// renderKustomizeFor renders what the chart is compared with for an
// example: a kustomization under deploy/, or an overlay written here.
func renderKustomizeFor(t *testing.T, target string) *rendered {
	t.Helper()
	if strings.HasPrefix(target, "kubernetes/") {
		return render(t, target)
	}
	overlay, ok := kustomizeOverlays[target]
	require.True(t, ok, "no overlay %s", target)
	dir := t.TempDir()
	root, err := filepath.Abs("../deploy/kubernetes")
	require.NoError(t, err)
	baseConfig, err := os.ReadFile(filepath.Join(root, overlay.configFrom))
	require.NoError(t, err)
	// kustomize takes other kustomizations by relative path only.
	rel, err := filepath.Rel(dir, root)
	require.NoError(t, err)
	files := map[string]string{
		"kustomization.yaml": strings.ReplaceAll(overlay.kustomization, "<deploy/kubernetes>", rel),
		"config.yaml":        string(baseConfig) + overlay.config,
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	return decodeRendered(t, target, kustomize(t, dir))
}

// kustomizeOverlay is an overlay for a setup deploy/kubernetes leaves to
// the chart: its kustomization (with <deploy/kubernetes> for the path of
// that directory), and its config file, configFrom's plus config.
type kustomizeOverlay struct {
	kustomization, configFrom, config string
}

// managedEgress opens 443 to any address: the clouds' APIs are names
// behind changing addresses.
const managedEgress = `  - target: {kind: NetworkPolicy, name: sunset}
    patch: |-
      - op: add
        path: /spec/egress/-
        value: {ports: [{protocol: TCP, port: 443}]}
`

var kustomizeOverlays = map[string]kustomizeOverlay{
	"fleet": {configFrom: "base/config.yaml", kustomization: `
resources: [<deploy/kubernetes>/overlays/kafka]
configMapGenerator:
  - {name: sunset-config, behavior: replace, files: [config.yaml]}
patches:
  - target: {kind: StatefulSet, name: sunset}
    patch: |-
      - {op: replace, path: /spec/replicas, value: 3}
      - {op: add, path: /spec/podManagementPolicy, value: Parallel}
`, config: `
kafka:
  brokers: [kafka-0.kafka.example:9093, kafka-1.kafka.example:9093, kafka-2.kafka.example:9093]
  topics: [k8s-audit]
  groupID: sunset
  rebalanceTimeout: 30s
  clusterField: cluster
  nodeField: hostname
  fleet:
    topic: sunset.requests
  tls:
    enabled: true
    caFile: /etc/sunset/kafka/ca.crt
  sasl:
    mechanism: scram-sha-512
    username: sunset
`},
	"eks": {configFrom: "base/config.yaml", kustomization: `
resources: [<deploy/kubernetes>/base]
configMapGenerator:
  - {name: sunset-config, behavior: replace, files: [config.yaml]}
patches:
  - target: {kind: ServiceAccount, name: sunset}
    patch: |-
      - {op: add, path: /metadata/annotations, value: {eks.amazonaws.com/role-arn: "arn:aws:iam::111122223333:role/sunset"}}
` + managedEgress, config: `
ingest:
  eks:
    - cluster: prod
      region: eu-west-1
`},
	"gke": {configFrom: "base/config.yaml", kustomization: `
resources: [<deploy/kubernetes>/base]
configMapGenerator:
  - {name: sunset-config, behavior: replace, files: [config.yaml]}
patches:
  - target: {kind: ServiceAccount, name: sunset}
    patch: |-
      - {op: add, path: /metadata/annotations, value: {iam.gke.io/gcp-service-account: sunset@my-project.iam.gserviceaccount.com}}
` + managedEgress, config: `
ingest:
  gke:
    - cluster: prod
      subscription: projects/my-project/subscriptions/sunset-prod
`},
}

// comparable is an object with what differs by convention between Helm's
// and kustomize's output taken out: the labels each tool adds about
// itself, the ConfigMap's hash suffix (kustomize) or checksum annotation
// (Helm), the order of lists the API server treats as sets, and the
// config file's comments and layout (compared as YAML).
func comparable(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	labels := func(m map[string]any) {
		l, _ := m["labels"].(map[string]any)
		delete(l, "helm.sh/chart")
		delete(l, "app.kubernetes.io/version")
		if _, ok := l["app.kubernetes.io/managed-by"]; ok {
			l["app.kubernetes.io/managed-by"] = "<tool>"
		}
	}
	meta := out["metadata"].(map[string]any)
	labels(meta)
	meta["name"] = configMapHash.ReplaceAllString(meta["name"].(string), "$1")
	if data, ok := out["data"].(map[string]any); ok && out["kind"] == "ConfigMap" {
		var cfg map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(data["config.yaml"].(string)), &cfg))
		data["config.yaml"] = cfg
	}
	spec, _ := out["spec"].(map[string]any)
	if out["kind"] == "StatefulSet" {
		tmpl := spec["template"].(map[string]any)
		tmeta := tmpl["metadata"].(map[string]any)
		labels(tmeta)
		if ann, ok := tmeta["annotations"].(map[string]any); ok {
			delete(ann, "checksum/config")
			if len(ann) == 0 {
				delete(tmeta, "annotations")
			}
		}
		for _, pvc := range spec["volumeClaimTemplates"].([]any) {
			labels(pvc.(map[string]any)["metadata"].(map[string]any))
		}
		comparablePod(tmpl["spec"].(map[string]any))
	}
	if out["kind"] == "CronJob" {
		job := spec["jobTemplate"].(map[string]any)["spec"].(map[string]any)
		comparablePod(job["template"].(map[string]any)["spec"].(map[string]any))
	}
	return out
}

// comparablePod sorts a pod spec's sets and takes the hash out of the
// config ConfigMap's name.
func comparablePod(pod map[string]any) {
	byName(pod, "volumes")
	for _, v := range pod["volumes"].([]any) {
		if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
			cm["name"] = configMapHash.ReplaceAllString(cm["name"].(string), "$1")
		}
	}
	for _, c := range pod["containers"].([]any) {
		byName(c.(map[string]any), "env")
		byName(c.(map[string]any), "volumeMounts")
	}
}

// byName sorts the list m[key] by its entries' names.
func byName(m map[string]any, key string) {
	list, _ := m[key].([]any)
	sort.SliceStable(list, func(i, j int) bool {
		return list[i].(map[string]any)["name"].(string) < list[j].(map[string]any)["name"].(string)
	})
}

// byKindAndName indexes rendered objects as Kind/name.
func byKindAndName(t *testing.T, r *rendered) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, obj := range r.raw {
		c := comparable(t, obj)
		key := fmt.Sprintf("%s/%s", c["kind"], c["metadata"].(map[string]any)["name"])
		require.NotContains(t, out, key, "%s renders %s twice", r.dir, key)
		out[key] = c
	}
	return out
}

// Every example values file renders, with the Helm SDK, the objects
// kustomize renders for the same setup: the base, the TLS and Kafka
// overlays, and a fleet, EKS and GKE on top of them. The chart creates no
// namespace unless asked (`helm install --create-namespace` does), so the
// kustomizations' Namespace is left out of the comparison.
func TestHelmChartRendersWhatKustomizeRenders(t *testing.T) {
	kubectl(t)
	entries, err := os.ReadDir(filepath.Join(chartDir, "examples"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(chartExamples)), names, "every example is compared with a kustomization")
	for example, target := range chartExamples {
		t.Run(example, func(t *testing.T) {
			chart := byKindAndName(t, renderChart(t, example))
			kust := byKindAndName(t, renderKustomizeFor(t, target))
			delete(kust, "Namespace/sunset")
			require.ElementsMatch(t, slices.Collect(maps.Keys(kust)), slices.Collect(maps.Keys(chart)), "the same objects")
			for key, want := range kust {
				require.Equal(t, want, chart[key], "%s: %s differs from %s", example, key, target)
			}
		})
	}

	// namespace.create renders the kustomizations' Namespace, labels and all.
	out, err := helmRender(t, map[string]any{"namespace": map[string]any{"create": true}})
	require.NoError(t, err)
	chart := byKindAndName(t, decodeRendered(t, "helm namespace.create", out))
	require.Equal(t, byKindAndName(t, render(t, "kubernetes/base"))["Namespace/sunset"], chart["Namespace/sunset"])
}

// What the deploy tests derive from Sunset's code holds for the chart's
// output of every example too: Sunset's grants are exactly what its
// requests need, and the NetworkPolicy lets out exactly what its config
// needs (the cloud APIs of config.ingest on 443 beside what
// requiredEgress lists).
func TestHelmChartGrantsAndNetworkPolicyFollowTheCode(t *testing.T) {
	kubectl(t)
	for example := range chartExamples {
		r := renderChart(t, example)
		requireOnlyNeededGrants(t, r)
		cfg := sunsetConfig(t, r)
		managed := false
		if ingest, ok := cfg["ingest"].(map[string]any); ok {
			managed = ingest["eks"] != nil || ingest["gke"] != nil
		}
		required := requiredEgress(t, r)
		want := wantEgressRules(t, r)
		if managed {
			tcp := corev1.ProtocolTCP
			port := intstr.FromInt32(443)
			required = append(required, destination{what: "the cloud's APIs", protocol: tcp, port: 443})
			want = append(want, networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}})
		}
		for _, d := range required {
			require.True(t, egressAdmits(r.np, d), "%s: the NetworkPolicy does not let out %s (%s/%d)", example, d.what, d.protocol, d.port)
		}
		require.Equal(t, want, r.np.Spec.Egress, example)
	}
}

// The chart's alert rules are the shipped rules file, byte for byte
// (make update-golden copies it).
func TestHelmChartRulesAreTheShippedRules(t *testing.T) {
	rules, err := os.ReadFile("../deploy/prometheus/sunset-rules.yaml")
	require.NoError(t, err)
	golden.Assert(t, filepath.Join(chartDir, "files/sunset-rules.yaml"), rules)
}

// values.schema.json turns away values of the wrong type or shape before
// anything renders, naming the value.
func TestHelmChartSchemaRejectsWrongValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"a port that is a word", map[string]any{"port": "https"}, "at '/port': got string, want integer"},
		{"replicas as text", map[string]any{"replicas": "three"}, "at '/replicas': got string, want integer"},
		{"a value the chart does not have", map[string]any{"tls": map[string]any{"certFile": "/tls.crt"}}, "at '/tls': additional properties 'certFile' not allowed"},
		{"a flag the chart sets, in config", map[string]any{"config": map[string]any{"listen": ":80"}}, "at '/config'"},
		{"a service type the chart does not serve", map[string]any{"service": map[string]any{"type": "LoadBalancer"}}, "at '/service/type'"},
		{"a broker without a port", map[string]any{"config": map[string]any{"kafka": map[string]any{"brokers": []any{"kafka-0"}}}}, "at '/config/kafka/brokers/0'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmRender(t, tc.vals)
			require.ErrorContains(t, err, "values don't meet the specifications of the schema")
			require.ErrorContains(t, err, tc.want)
		})
	}
	// And what the schema cannot say, the templates do.
	_, err := helmRender(t, map[string]any{"webhook": map[string]any{"tokenAuthSecret": ""}})
	require.ErrorContains(t, err, "webhook.tokenAuthSecret is empty and tls.webhookClientCertificates is off: Sunset refuses a webhook without credentials; set one")
	_, err = helmRender(t, map[string]any{"tls": map[string]any{"webhookClientCertificates": true}})
	require.ErrorContains(t, err, "tls.webhookClientCertificates needs tls.existingSecret")
	// The scan no longer runs in Sunset's pod: a value of the chart's
	// earlier in-pod scan says where it went.
	_, err = helmRender(t, map[string]any{"scan": map[string]any{"interval": "15m"}})
	require.ErrorContains(t, err, "scan.interval is gone: the cluster scan runs in a CronJob of its own (scan.enabled, scan.schedule)")
}

// `helm lint --strict` finds nothing to warn about, with each example's
// values.
func TestHelmChartLints(t *testing.T) {
	kube, err := chartcommon.ParseKubeVersion(helmKubeVersion)
	require.NoError(t, err)
	for example := range chartExamples {
		lint := action.NewLint()
		lint.Strict, lint.Namespace, lint.KubeVersion = true, helmNamespace, kube
		res := lint.Run([]string{chartDir}, exampleValues(t, example))
		var problems []string
		for _, m := range res.Messages {
			if m.Severity > support.InfoSev {
				problems = append(problems, m.Error())
			}
		}
		for _, err := range res.Errors {
			problems = append(problems, err.Error())
		}
		require.Empty(t, problems, "helm lint --strict with %s", example)
		require.Equal(t, 1, res.TotalChartsLinted)
	}
}

// Every value in values.yaml says what it does, in a comment above it or
// beside it, and the schema knows it; the config file's keys are
// docs/configuration.md's, and selectors and resources are Kubernetes'.
func TestHelmChartValuesAreDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var doc yamlv3.Node
	require.NoError(t, yamlv3.Unmarshal(raw, &doc))
	schemaRaw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	require.NoError(t, err)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(schemaRaw, &schema))
	selfDescribed := map[string]bool{"config": true, "resources": true, "scan.resources": true, "networkPolicy.prometheus": true}
	var undocumented, unknown []string
	var walk func(n *yamlv3.Node, path string, schema map[string]any)
	walk = func(n *yamlv3.Node, path string, schema map[string]any) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			name := strings.TrimPrefix(path+"."+key.Value, ".")
			if strings.TrimSpace(key.HeadComment+key.LineComment+val.LineComment) == "" {
				undocumented = append(undocumented, name)
			}
			props, _ := schema["properties"].(map[string]any)
			sub, ok := props[key.Value].(map[string]any)
			if !ok {
				unknown = append(unknown, name)
				continue
			}
			if val.Kind == yamlv3.MappingNode && !selfDescribed[name] {
				walk(val, name, sub)
			}
		}
	}
	walk(doc.Content[0], "", schema)
	require.Empty(t, undocumented, "values without a comment")
	require.Empty(t, unknown, "values the schema does not know")
}

// The chart installs the release the kustomizations install: the image
// tag of the base's images:, for which the chart's appVersion stands.
func TestHelmChartImageIsTheBases(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	require.Equal(t, baseImageTag(t), chart.AppVersion)
	vals, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^  tag: (\S+)$`).FindSubmatch(vals)
	require.NotNil(t, m, "values.yaml sets image.tag")
	require.Equal(t, baseImageTag(t), string(m[1]))
}
