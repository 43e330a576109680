package fieldrule

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSetsField(t *testing.T) {
	path := strings.Split("status.nodeInfo.kubeProxyVersion", ".")
	for body, want := range map[string]bool{
		// A kubelet's strategic merge patch of nodes/status.
		`{"status":{"nodeInfo":{"kubeProxyVersion":"v1.30.2","kubeletVersion":"v1.30.2"}}}`: true,
		`{"status":{"nodeInfo":{"kubeletVersion":"v1.31.0"}}}`:                              false,
		`{"status":{"nodeInfo":{"kubeProxyVersion":""}}}`:                                   false,
		`{"status":{"nodeInfo":{"kubeProxyVersion":null}}}`:                                 false,
		`{"status":{"conditions":[{"type":"Ready"}]}}`:                                      false,
		// A full Node object, as in an update (PUT).
		`{"kind":"Node","apiVersion":"v1","metadata":{"name":"worker-1"},"status":{"nodeInfo":{"kubeProxyVersion":"v1.29.0","osImage":"Debian"}}}`: true,
		// JSON Patch: the field, an object above it, or something else.
		`[{"op":"replace","path":"/status/nodeInfo/kubeProxyVersion","value":"v1.30.0"}]`: true,
		`[{"op":"add","path":"/status/nodeInfo","value":{"kubeProxyVersion":"v1.30.0"}}]`: true,
		`[{"op":"remove","path":"/status/nodeInfo/kubeProxyVersion"}]`:                    false,
		`[{"op":"replace","path":"/status/nodeInfo/kubeletVersion","value":"v1.30.0"}]`:   false,
		`[{"op":"test","path":"/status/nodeInfo/kubeProxyVersion","value":"v1.30.0"}]`:    false,
		`not json`: false,
		``:         false,
	} {
		require.Equal(t, want, SetsField([]byte(body), path), body)
	}
}

func TestMatchAndConfig(t *testing.T) {
	s, err := New([]Rule{{Name: "service-topology-keys", Version: "v1", Resource: "services",
		Verbs: []string{"create", "update", "patch"}, Field: "spec.topologyKeys", DeprecatedIn: "1.17", RemovedIn: "1.22", Message: "use topology-aware routing"}})
	require.NoError(t, err)
	require.Len(t, s.Rules(), 2)
	require.Len(t, s.Match("", "v1", "services", "", "create", []byte(`{"spec":{"topologyKeys":["kubernetes.io/hostname"]}}`)), 1)
	body := []byte(`{"status":{"nodeInfo":{"kubeProxyVersion":"v1.30.2"}}}`)
	require.Equal(t, []Rule{KubeProxyVersion}, s.Match("", "v1", "nodes", "status", "patch", body))
	require.Empty(t, s.Match("", "v1", "nodes", "status", "get", body), "verb not in the rule")
	require.Empty(t, s.Match("", "v1", "nodes", "", "patch", body), "another subresource")
	require.Empty(t, s.Match("", "v1", "nodes", "status", "patch", nil), "Metadata level: no body, no match")

	_, err = New([]Rule{{Name: "Bad_Name", Field: ".x", DeprecatedIn: "soon"}, {Name: "a", Version: "v1", Resource: "r", Verbs: []string{"get"}, Field: "f"}, {Name: "a", Version: "v1", Resource: "r", Verbs: []string{"get"}, Field: "f"}})
	require.EqualError(t, err, `field-rules[0]: field rule "Bad_Name": deprecatedIn: "soon" is not a Kubernetes release such as 1.37; field ".x" is not a dotted path such as status.nodeInfo.kubeProxyVersion; name "Bad_Name" is not a lowercase DNS label; verbs are required, e.g. [update, patch]; version and resource are required
field-rules[2]: name "a" is used twice`)
}

func TestRuleReleasesAreNormalised(t *testing.T) {
	s, err := New([]Rule{{Name: "service-topology-keys", Version: "v1", Resource: "services",
		Verbs: []string{"create"}, Field: "spec.topologyKeys", DeprecatedIn: "v1.17", RemovedIn: "v1.22.0"}})
	require.NoError(t, err)
	r, ok := s.Rule("service-topology-keys")
	require.True(t, ok)
	require.Equal(t, "1.17", r.DeprecatedIn)
	require.Equal(t, "1.22", r.RemovedIn)
}
