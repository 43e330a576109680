package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	yamlv3 "go.yaml.in/yaml/v3"
	"helm.sh/helm/v4/pkg/action"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/internal/testutil/golden"
)

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
