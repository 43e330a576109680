package test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-sunset/sunset/gate/capihook"
)

// The paths the overlay ships are the ones Sunset serves with the
// overlay's own config: the webhook's path answers an AdmissionReview for
// each of the seven kinds, and the ExtensionConfig's path lists handler
// sunset-gate for both upgrade hooks, each of which answers at the path
// Cluster API makes of it.
func TestKustomizeGateOverlayRunsInSunset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	kubectl(t)
	r := render(t, gateOverlay)
	vwc, ext := gateObjects(t, r)
	run := runRendered(t, r, baseSecretData(newTestPKI(t)), "")
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(run.caPEM))
	// kube-apiserver and Cluster API call without credentials.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	post := func(path string, body any, out any) {
		t.Helper()
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		resp, err := client.Post(run.url+path, "application/json", bytes.NewReader(raw))
		require.NoError(t, err)
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "POST %s: %s", path, got)
		require.NoError(t, json.Unmarshal(got, out), "POST %s: %s", path, got)
	}

	// A raise of the minor version of each kind, for a cluster Sunset has
	// never heard: judged, so allowed with a warning; the same object
	// with only a label changed: allowed silently.
	for i, k := range builtinGateKinds(t) {
		object := func(version string, labels map[string]any) runtime.RawExtension {
			obj := map[string]any{"apiVersion": k.group + "/v1", "kind": k.kind,
				"metadata": map[string]any{"name": "never-heard", "namespace": "fleet", "labels": labels}}
			m := obj
			for _, f := range k.path[:len(k.path)-1] {
				next := map[string]any{}
				m[f] = next
				m = next
			}
			m[k.path[len(k.path)-1]] = version
			raw, err := json.Marshal(obj)
			require.NoError(t, err)
			return runtime.RawExtension{Raw: raw}
		}
		for _, tc := range []struct {
			what     string
			old, new runtime.RawExtension
			warned   bool
		}{
			{"a minor raise", object("v1.36.3", nil), object("v1.37.0", nil), true},
			{"a label", object("v1.36.3", nil), object("v1.36.3", map[string]any{"team": "platform"}), false},
		} {
			uid := types.UID("uid-" + k.group + "-" + tc.what)
			review := admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{UID: uid,
					Kind:     metav1.GroupVersionKind{Group: k.group, Version: "v1", Kind: k.kind},
					Resource: metav1.GroupVersionResource{Group: k.group, Version: "v1", Resource: k.resource},
					Name:     "never-heard", Namespace: "fleet", Operation: admissionv1.Update,
					Object: tc.new, OldObject: tc.old},
			}
			var got admissionv1.AdmissionReview
			post(*vwc.Webhooks[0].ClientConfig.Service.Path, review, &got)
			require.NotNil(t, got.Response, "%d %s: %s", i, k.group, tc.what)
			require.Equal(t, uid, got.Response.UID, "%s: %s", k.group, tc.what)
			require.True(t, got.Response.Allowed, "%s: %s", k.group, tc.what)
			require.Equal(t, tc.warned, len(got.Response.Warnings) > 0, "%s: %s: warnings %q", k.group, tc.what, got.Response.Warnings)
		}
	}

	// Cluster API's discovery, and each hook at the path Cluster API
	// builds: <path>/<group>/<version>/<lowercase hook>/<handler>.
	const hooksAPI = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
	prefix := ext.Spec.ClientConfig.Service.Path
	var discovery struct {
		Kind     string `json:"kind"`
		Status   string `json:"status"`
		Handlers []struct {
			Name        string `json:"name"`
			RequestHook struct {
				APIVersion string `json:"apiVersion"`
				Hook       string `json:"hook"`
			} `json:"requestHook"`
		} `json:"handlers"`
	}
	post(prefix+"/"+hooksAPI+"/discovery", map[string]any{"apiVersion": hooksAPI, "kind": "DiscoveryRequest"}, &discovery)
	require.Equal(t, "DiscoveryResponse", discovery.Kind)
	require.Equal(t, "Success", discovery.Status)
	var hooks []string
	for _, h := range discovery.Handlers {
		require.Equal(t, capihook.HandlerName, h.Name)
		require.Equal(t, hooksAPI, h.RequestHook.APIVersion)
		hooks = append(hooks, h.RequestHook.Hook)
	}
	slices.Sort(hooks)
	require.Equal(t, []string{"BeforeClusterUpgrade", "BeforeControlPlaneUpgrade"}, hooks)
	for _, hook := range hooks {
		var answer struct {
			Kind   string `json:"kind"`
			Status string `json:"status"`
		}
		post(prefix+"/"+hooksAPI+"/"+strings.ToLower(hook)+"/"+capihook.HandlerName, map[string]any{
			"apiVersion": hooksAPI, "kind": hook + "Request",
			"cluster": map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
				"metadata": map[string]any{"name": "never-heard", "namespace": "fleet"}},
			"fromKubernetesVersion": "v1.36.3", "toKubernetesVersion": "v1.36.4",
		}, &answer)
		require.Equal(t, hook+"Response", answer.Kind)
		require.Equal(t, "Success", answer.Status, hook)
	}
}
