package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
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
