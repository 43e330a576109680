package capihook

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/kube-sunset/sunset/gate"
)

func TestPathsAreClusterAPIs(t *testing.T) {
	require.Equal(t, "/gate/capi/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", DiscoveryPath)
	require.Equal(t, "/gate/capi/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/sunset-gate", BeforeClusterUpgradePath)
	require.Equal(t, "/gate/capi/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforecontrolplaneupgrade/sunset-gate", BeforeControlPlaneUpgradePath)
}

func TestDiscoveryAndUnreadableRequests(t *testing.T) {
	mux := http.NewServeMux()
	New(Options{Gate: gate.New(gate.Options{})}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(path string, body []byte) (int, string) {
		resp, err := http.Post(srv.URL+path, "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	req, err := json.Marshal(&hooksv1.DiscoveryRequest{})
	require.NoError(t, err)
	code, body := post(DiscoveryPath, req)
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryResponse","status":"Success","handlers":[
		{"name":"sunset-gate","requestHook":{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","hook":"BeforeClusterUpgrade"},"timeoutSeconds":10,"failurePolicy":"Ignore"},
		{"name":"sunset-gate","requestHook":{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","hook":"BeforeControlPlaneUpgrade"},"timeoutSeconds":10,"failurePolicy":"Ignore"}]}`, body)

	code, body = post(BeforeClusterUpgradePath, []byte(`{"cluster":`))
	require.Equal(t, 400, code)
	require.JSONEq(t, `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterUpgradeResponse","status":"Failure",
		"message":"the body is not a BeforeClusterUpgrade request of hooks.runtime.cluster.x-k8s.io/v1alpha1 in JSON: unexpected EOF"}`, body)
	code, body = post(BeforeControlPlaneUpgradePath, []byte(`{"fromKubernetesVersion":"v1.36.3","toKubernetesVersion":"latest"}`))
	require.Equal(t, 400, code)
	require.JSONEq(t, `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeControlPlaneUpgradeResponse","status":"Failure",
		"message":"fromKubernetesVersion and toKubernetesVersion: \"latest\" is not a Kubernetes version such as v1.31.2 or 1.31"}`, body)
	code, body = post(BeforeClusterUpgradePath, bytes.Repeat([]byte(" "), maxBodyBytes+1))
	require.Equal(t, 413, code)
	require.JSONEq(t, `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterUpgradeResponse","status":"Failure",
		"message":"the request is larger than 4194304 bytes"}`, body)
}

// Only the Cluster's metadata is read: a spec of a shape this build of
// Cluster API's types does not know is still judged, not refused as
// unreadable (which the Ignore policy would let through unjudged).
func TestOnlyTheClustersMetadataIsRead(t *testing.T) {
	mux := http.NewServeMux()
	New(Options{Gate: gate.New(gate.Options{})}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	body := `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterUpgradeRequest",
		"cluster":{"metadata":{"name":"prod","namespace":"fleet"},"spec":{"topology":"a shape from a later release"},"status":7},
		"fromKubernetesVersion":"v1.36.3","toKubernetesVersion":"v1.36.4"}`
	resp, err := http.Post(srv.URL+BeforeClusterUpgradePath, "application/json", bytes.NewBufferString(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, string(out))
	require.JSONEq(t, `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterUpgradeResponse","status":"Success","retryAfterSeconds":0}`, string(out))
}
