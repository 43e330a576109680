package app_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// kubeletStatus is a kubelet's nodes/status write, as kube-apiserver audits
// it; body nil means Metadata level (no requestObject).
func kubeletStatus(id, node, verb string, body any) map[string]any {
	kv := []any{
		"verb", verb,
		"requestURI", "/api/v1/nodes/" + node + "/status",
		"user", map[string]any{"username": "system:node:" + node, "groups": []string{"system:nodes", "system:authenticated"}},
		"userAgent", "kubelet/v1.30.2 (linux/amd64) kubernetes/3c3fc96",
		"objectRef", map[string]any{"resource": "nodes", "name": node, "apiVersion": "v1", "subresource": "status"},
		"annotations", map[string]any{"authorization.k8s.io/decision": "allow"},
	}
	if body != nil {
		kv = append(kv, "level", "Request", "requestObject", body)
	}
	return ev(id, kv...)
}

func TestFieldRuleKubeProxyVersion(t *testing.T) {
	s := start(t, testConfig(t))
	withField := map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"kubeProxyVersion": "v1.30.2", "kubeletVersion": "v1.30.2"}}}
	without := map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"kubeletVersion": "v1.31.0"}, "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}
	fullNode := map[string]any{"kind": "Node", "apiVersion": "v1", "metadata": map[string]any{"name": "worker-3"},
		"status": map[string]any{"nodeInfo": map[string]any{"kubeProxyVersion": "v1.29.4", "osImage": "Debian GNU/Linux 12"}}}
	var items []map[string]any
	for i := 0; i < 3; i++ {
		items = append(items, kubeletStatus(fmt.Sprint("w1-", i), "worker-1", "patch", withField))
	}
	for i := 0; i < 2; i++ {
		items = append(items, kubeletStatus(fmt.Sprint("w2-", i), "worker-2", "patch", without))
	}
	items = append(items, kubeletStatus("w3-0", "worker-3", "update", fullNode))
	// Metadata level: the body is not in the event, no rule can match.
	for i := 0; i < 2; i++ {
		items = append(items, kubeletStatus(fmt.Sprint("w4-", i), "worker-4", "patch", nil))
	}
	for round := 0; round < 2; round++ {
		code, resp := s.post("/audit/webhook/master-0", "application/json", eventList(items...))
		require.Equal(t, 200, code)
		want := `{"cluster":"default","node":"master-0","counted":0,"duplicates":0,"skipped":8,"skippedBy":{"not_deprecated":8},"fieldMatches":4,"invalid":0}`
		if round == 1 {
			want = `{"cluster":"default","node":"master-0","counted":0,"duplicates":0,"skipped":8,"skippedBy":{"not_deprecated":8},"invalid":0}`
		}
		require.JSONEq(t, want, string(resp), "round %d: a re-sent batch matches nothing new", round)
	}

	code, body := s.get("/apis/sunset.dev/v1/fieldrequestcounts/kube-proxy-version")
	require.Equal(t, 200, code)
	var obj sunsetv1.FieldRequestCount
	require.NoError(t, json.Unmarshal(body, &obj))
	require.Equal(t, "FieldRequestCount", obj.Kind)
	require.Equal(t, "status.nodeInfo.kubeProxyVersion", obj.Spec.Rule.Field)
	require.Equal(t, "1.31", obj.Status.DeprecatedInRelease)
	require.Equal(t, int64(4), obj.Status.RequestCount)
	requireNodes(t, obj.Status.CurrentHour, `[{"nodeName":"master-0","cluster":"default","requestCount":4,"byUser":[
		{"username":"system:node:worker-1","userAgent":"kubelet/v1.30.2","requestCount":3,"byVerb":[{"verb":"patch","requestCount":3}]},
		{"username":"system:node:worker-3","userAgent":"kubelet/v1.30.2","requestCount":1,"byVerb":[{"verb":"update","requestCount":1}]}]}]`)

	code, body = s.get("/apis/sunset.dev/v1/fieldrequestcounts")
	require.Equal(t, 200, code)
	var list sunsetv1.FieldRequestCountList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Items, 1)
	require.Equal(t, int64(4), list.Items[0].Status.RequestCount)

	require.Equal(t, []string{}, listNames(t, s, ""), "field counts are not APIs")
	code, body = s.get("/apis/sunset.dev/v1/fieldrequestcounts/nope")
	require.Equal(t, 404, code)
	require.JSONEq(t, notFoundBody("fieldrequestcounts", "nope", "no field rule has that name (see field-rules)"), string(body))
}
