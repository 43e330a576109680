package app_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/selfsigned"
	"github.com/kube-sunset/sunset/store"
)

// gateConfig is testConfig with the gate on.
func gateConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	cfg.Gate.Enabled = true
	return cfg
}

// clusterObject is an object of a kind that holds a version, shaped as
// its controller's CRD writes it, with version at its version field.
type clusterObject struct {
	group, version, kind string
	// object builds the object at a Kubernetes version.
	object func(name, version string) map[string]any
	// from and to spell a raise from 1.36 to 1.37 as its provider does.
	from, to string
}

func meta(name string) map[string]any {
	return map[string]any{"name": name, "namespace": "fleet", "uid": "6f1c1f5e-0000-4000-8000-000000000001", "resourceVersion": "48213", "generation": 4,
		"labels": map[string]any{"team": "platform"}}
}

var clusterObjects = []clusterObject{
	{"cluster.x-k8s.io", "v1beta2", "Cluster", func(name, v string) map[string]any {
		return map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": meta(name),
			"spec": map[string]any{"clusterNetwork": map[string]any{"pods": map[string]any{"cidrBlocks": []string{"192.168.0.0/16"}}},
				"topology": map[string]any{"classRef": map[string]any{"name": "quick-start"}, "version": v, "controlPlane": map[string]any{"replicas": 3},
					"workers": map[string]any{"machineDeployments": []any{map[string]any{"class": "default-worker", "name": "md-0", "replicas": 2}}}}},
			"status": map[string]any{"phase": "Provisioned"}}
	}, "v1.36.3", "v1.37.0"},
	{"controlplane.cluster.x-k8s.io", "v1beta2", "KubeadmControlPlane", func(name, v string) map[string]any {
		return map[string]any{"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane", "metadata": meta(name),
			"spec": map[string]any{"replicas": 3, "version": v, "machineTemplate": map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
				"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": name + "-control-plane"}}}}}
	}, "v1.36.3", "v1.37.0"},
	{"eks.services.k8s.aws", "v1alpha1", "Cluster", func(name, v string) map[string]any {
		return map[string]any{"apiVersion": "eks.services.k8s.aws/v1alpha1", "kind": "Cluster", "metadata": meta(name),
			"spec": map[string]any{"name": name, "roleARN": "arn:aws:iam::123456789012:role/eks-cluster", "version": v,
				"resourcesVPCConfig": map[string]any{"subnetIDs": []string{"subnet-0a", "subnet-0b"}}}}
	}, "1.36", "1.37"},
	{"containerservice.azure.com", "v1api20240901", "ManagedCluster", func(name, v string) map[string]any {
		return map[string]any{"apiVersion": "containerservice.azure.com/v1api20240901", "kind": "ManagedCluster", "metadata": meta(name),
			"spec": map[string]any{"location": "westeurope", "owner": map[string]any{"name": "fleet-rg"}, "dnsPrefix": name, "kubernetesVersion": v,
				"agentPoolProfiles": []any{map[string]any{"name": "system", "count": 3, "vmSize": "Standard_D4s_v5", "mode": "System"}}}}
	}, "1.36.3", "1.37.0"},
	{"container.cnrm.cloud.google.com", "v1beta1", "ContainerCluster", func(name, v string) map[string]any {
		return map[string]any{"apiVersion": "container.cnrm.cloud.google.com/v1beta1", "kind": "ContainerCluster", "metadata": meta(name),
			"spec": map[string]any{"location": "europe-west1", "initialNodeCount": 1, "minMasterVersion": v, "releaseChannel": map[string]any{"channel": "REGULAR"}}}
	}, "1.36.3-gke.1000", "1.37.0-gke.1100"},
	{"eks.aws.upbound.io", "v1beta1", "Cluster", func(name, v string) map[string]any {
		return map[string]any{"apiVersion": "eks.aws.upbound.io/v1beta1", "kind": "Cluster", "metadata": meta(name),
			"spec": map[string]any{"forProvider": map[string]any{"region": "eu-west-1", "roleArnSelector": map[string]any{"matchLabels": map[string]any{"role": "eks"}},
				"version": v, "vpcConfig": []any{map[string]any{"endpointPublicAccess": true}}}, "providerConfigRef": map[string]any{"name": "default"}}}
	}, "1.36", "1.37"},
	{"provisioning.cattle.io", "v1", "Cluster", func(name, v string) map[string]any {
		return map[string]any{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster", "metadata": meta(name),
			"spec": map[string]any{"kubernetesVersion": v, "rkeConfig": map[string]any{"machinePools": []any{}}}}
	}, "v1.36.3+rke2r1", "v1.37.0+rke2r1"},
}

// review is the AdmissionReview kube-apiserver sends for a change of old
// to obj.
func review(t *testing.T, c clusterObject, op admissionv1.Operation, old, obj map[string]any) []byte {
	t.Helper()
	raw := func(o map[string]any) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	gvk := metav1.GroupVersionKind{Group: c.group, Version: c.version, Kind: c.kind}
	m := obj["metadata"].(map[string]any)
	r := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("705ab4f5-6393-11e8-b7cc-42010a800002"), Kind: gvk, RequestKind: &gvk,
			Resource: metav1.GroupVersionResource{Group: c.group, Version: c.version, Resource: strings.ToLower(c.kind) + "s"},
			Name:     m["name"].(string), Namespace: m["namespace"].(string), Operation: op,
			UserInfo: authenticationv1.UserInfo{Username: "alice@example.com", Groups: []string{"platform", "system:authenticated"}},
			Object:   raw(obj), OldObject: raw(old), Options: runtime.RawExtension{Raw: []byte(`{"apiVersion":"meta.k8s.io/v1","kind":"UpdateOptions"}`)}}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	return b
}

// admitted posts a review and returns the response.
func admitted(t *testing.T, s *server, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	code, out := s.post("/gate/admit", "application/json", body)
	require.Equal(t, http.StatusOK, code, string(out))
	var r admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(out, &r))
	require.Equal(t, "AdmissionReview", r.Kind)
	require.Equal(t, "admission.k8s.io/v1", r.APIVersion)
	require.Equal(t, types.UID("705ab4f5-6393-11e8-b7cc-42010a800002"), r.Response.UID)
	return r.Response
}

func gateReviews(t *testing.T, s *server, source, decision string) float64 {
	t.Helper()
	return metricValue(t, s.reg, "sunset_gate_reviews_total", map[string]string{"source": source, "decision": decision})
}

// refusedAt137 is the refusal of cluster default (postCheckFixture) from
// 1.36 to 1.37 for an object of kind: the sentence is upgradechecks' for
// the same cluster, target and starting release.
func refusedAt137(t *testing.T, s *server, kind string) string {
	t.Helper()
	check := getJSON[sunsetv1.UpgradeCheck](t, s, "/apis/sunset.dev/v1/upgradechecks/1.37?cluster=default&from=1.36")
	require.Equal(t, sunsetv1.ExitCodeRemoved, check.Status.ExitCode)
	return `sunset: the upgrade of cluster default from 1.36 to 1.37 is refused: ` + check.Status.Message + `
- storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass: 1 request in the last 24h by carol (terraform/1.9.0; last seen 2026-11-21 07:00 UTC)
To upgrade anyway, annotate ` + kind + ` fleet/default with sunset.dev/upgrade-override="<reason>".`
}

// Each built-in kind: the version is read from the old and the new
// object, the object stands for the cluster of its name, and a raise to
// 1.37 is refused for the storage v1beta1 client, with the verdict
// upgradechecks give.
func TestGateRefusesEachBuiltinKind(t *testing.T) {
	s := start(t, gateConfig(t))
	postCheckFixture(s)
	check := getJSON[sunsetv1.UpgradeCheck](t, s, "/apis/sunset.dev/v1/upgradechecks/1.37?cluster=default")
	require.Equal(t, sunsetv1.ExitCodeRemoved, check.Status.ExitCode)
	require.True(t, strings.HasPrefix(refusedAt137(t, s, "Cluster"), "sunset: the upgrade of cluster default from 1.36 to 1.37 is refused: NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested"))

	for _, c := range clusterObjects {
		resp := admitted(t, s, review(t, c, admissionv1.Update, c.object("default", c.from), c.object("default", c.to)))
		require.False(t, resp.Allowed, c.kind)
		require.Empty(t, resp.Warnings, c.kind)
		require.Equal(t, &metav1.Status{Status: "Failure", Code: 403, Reason: metav1.StatusReasonForbidden, Message: refusedAt137(t, s, c.kind)}, resp.Result, c.group)
		require.Contains(t, resp.Result.Message, check.Status.Message, "the sentence of upgradechecks")

		// A patch release of the same object passes without a word.
		patched := strings.Replace(c.to, "1.37.0", "1.37.1", 1)
		if patched != c.to {
			resp = admitted(t, s, review(t, c, admissionv1.Update, c.object("default", c.to), c.object("default", patched)))
			require.Equal(t, &admissionv1.AdmissionResponse{UID: resp.UID, Allowed: true}, resp, c.kind)
		}
	}
	require.Equal(t, 7.0, gateReviews(t, s, "admission", "refused"))
	require.Equal(t, 5.0, gateReviews(t, s, "admission", "allowed"))
}

// A raise that removes nothing in use warns of each deprecated API; a
// downgrade, a create and a change without a version pass silently.
func TestGateWarnsAndPasses(t *testing.T) {
	s := start(t, gateConfig(t))
	postCheckFixture(s)
	capi := clusterObjects[0]

	resp := admitted(t, s, review(t, capi, admissionv1.Update, capi.object("default", "v1.35.2"), capi.object("default", "v1.36.0")))
	require.True(t, resp.Allowed)
	require.Nil(t, resp.Result)
	require.Equal(t, []string{
		"sunset: storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass: 1 request in the last 24h by carol",
		"sunset: v1 ComponentStatus is deprecated in v1.19+: 2 requests in the last 24h by admin",
		"sunset: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice: 8 requests in the last 24h by alice, admin, bob",
		"sunset: e2e.example.com/v1alpha1 widgets is deprecated: 1 request in the last 24h by bob",
		"sunset: e2e.example.com/v1beta1 widgets is deprecated: 28 requests in the last 24h by alice, bob",
		"sunset: allowed: nothing removed by 1.36 is still called",
	}, resp.Warnings)
	require.Equal(t, 1.0, gateReviews(t, s, "admission", "warned"))

	for name, tc := range map[string][2]map[string]any{
		"downgrade":  {capi.object("default", "v1.37.0"), capi.object("default", "v1.36.3")},
		"no version": {capi.object("default", ""), capi.object("default", "")},
		"set first":  {{"metadata": meta("default")}, capi.object("default", "v1.37.0")},
	} {
		if name == "no version" {
			delete(tc[0]["spec"].(map[string]any)["topology"].(map[string]any), "version")
			delete(tc[1]["spec"].(map[string]any)["topology"].(map[string]any), "version")
		}
		resp = admitted(t, s, review(t, capi, admissionv1.Update, tc[0], tc[1]))
		require.Equal(t, &admissionv1.AdmissionResponse{UID: resp.UID, Allowed: true}, resp, name)
	}
	resp = admitted(t, s, review(t, capi, admissionv1.Create, nil, capi.object("default", "v1.37.0")))
	require.Equal(t, &admissionv1.AdmissionResponse{UID: resp.UID, Allowed: true}, resp, "create")
	require.Equal(t, 4.0, gateReviews(t, s, "admission", "allowed"))

	// A version the gate cannot read is let through with a warning.
	resp = admitted(t, s, review(t, capi, admissionv1.Update, capi.object("default", "v1.36.3"), capi.object("default", "latest")))
	require.Equal(t, &admissionv1.AdmissionResponse{UID: resp.UID, Allowed: true, Warnings: []string{
		`sunset: not judged: spec.topology.version: "latest" is not a Kubernetes version such as v1.31.2 or 1.31`}}, resp)
}

// Which cluster: the sunset.dev/cluster label, else gate.clusters, else
// the name; a cluster Sunset never heard passes with a warning.
func TestGateClusterMappingAndUnknown(t *testing.T) {
	cfg := gateConfig(t)
	cfg.Gate.Clusters = map[string]string{"fleet/eu-1": "prod"}
	s := start(t, cfg)
	postCheckFixture(s)
	capi := clusterObjects[0]
	raise := func(name string, labels map[string]any) *admissionv1.AdmissionResponse {
		old, obj := capi.object(name, "v1.36.3"), capi.object(name, "v1.37.0")
		maps.Copy(old["metadata"].(map[string]any)["labels"].(map[string]any), labels)
		maps.Copy(obj["metadata"].(map[string]any)["labels"].(map[string]any), labels)
		return admitted(t, s, review(t, capi, admissionv1.Update, old, obj))
	}

	// prod's batch/v1beta1 CronJob client gets 404s already.
	resp := raise("eu-1", nil)
	require.False(t, resp.Allowed)
	prod := getJSON[sunsetv1.UpgradeCheck](t, s, "/apis/sunset.dev/v1/upgradechecks/1.37?cluster=prod&from=1.36")
	require.Equal(t, `sunset: the upgrade of cluster prod from 1.36 to 1.37 is refused: `+prod.Status.Message+`
- batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob: 2 requests in the last 24h by system:serviceaccount:ci:deployer (helm/v3.14.0; last seen 2026-11-21 19:00 UTC) (already removed: these calls fail today)
To upgrade anyway, annotate Cluster fleet/eu-1 with sunset.dev/upgrade-override="<reason>".`, resp.Result.Message)

	resp = raise("eu-1", map[string]any{"sunset.dev/cluster": "default"})
	require.Equal(t, strings.Replace(refusedAt137(t, s, "Cluster"), "fleet/default", "fleet/eu-1", 1), resp.Result.Message, "the label comes first")

	resp = raise("staging", nil)
	require.Equal(t, &admissionv1.AdmissionResponse{UID: resp.UID, Allowed: true, Warnings: []string{
		`sunset: the upgrade of cluster staging from 1.36 to 1.37 was not judged: Sunset has never heard of cluster "staging". Name the cluster Sunset counts with the label sunset.dev/cluster on Cluster fleet/staging, or in gate.clusters`}}, resp)
	require.Equal(t, 1.0, gateReviews(t, s, "admission", "unknown"))
	require.Equal(t, 2.0, gateReviews(t, s, "admission", "refused"))
}

// A cluster heard but silent longer than gate.staleAfter is unknown:
// allowed with a warning by default, refused with whenUnknown: refuse.
func TestGateStaleCluster(t *testing.T) {
	cfg := gateConfig(t)
	cfg.Gate.WhenUnknown = "refuse"
	var now atomic.Pointer[time.Time]
	now.Store(&testNow)
	s := startWith(t, cfg, func(o *app.Options) { o.Now = func() time.Time { return *now.Load() } })
	postCheckFixture(s)
	capi := clusterObjects[0]
	body := review(t, capi, admissionv1.Update, capi.object("default", "v1.36.3"), capi.object("default", "v1.37.0"))
	require.Equal(t, refusedAt137(t, s, "Cluster"), admitted(t, s, body).Result.Message)

	later := testNow.Add(3 * time.Hour)
	now.Store(&later)
	resp := admitted(t, s, body)
	require.False(t, resp.Allowed)
	require.Equal(t, `sunset: the upgrade of cluster default from 1.36 to 1.37 is refused: it cannot be judged, Sunset has heard nothing from cluster default for 3h (gate.staleAfter is 2h) (gate.whenUnknown is refuse). To upgrade anyway, annotate Cluster fleet/default with sunset.dev/upgrade-override="<reason>".`, resp.Result.Message)
	require.Equal(t, 1.0, gateReviews(t, s, "admission", "unknown"))
}

// The override annotation lets a refused raise through; it is logged
// with the user and the reason, and counted.
func TestGateOverride(t *testing.T) {
	lines := newLogLines(t)
	s := startLogging(t, gateConfig(t), zerolog.New(lines))
	postCheckFixture(s)
	capi := clusterObjects[1]
	obj := capi.object("default", "v1.37.0")
	obj["metadata"].(map[string]any)["annotations"] = map[string]any{"sunset.dev/upgrade-override": "INC-4711: carol's job moves to v1 next week"}
	resp := admitted(t, s, review(t, capi, admissionv1.Update, capi.object("default", "v1.36.3"), obj))
	require.True(t, resp.Allowed)
	// One line: kube-apiserver drops a warning of several.
	require.Equal(t, []string{strings.ReplaceAll(`sunset: allowed by sunset.dev/upgrade-override "INC-4711: carol's job moves to v1 next week"; without it: `+
		refusedAt137(t, s, "KubeadmControlPlane"), "\n", "; ")}, resp.Warnings)
	lines.wait("upgrade allowed by override")
	require.Equal(t, 1.0, gateReviews(t, s, "admission", "overridden"))
	require.Equal(t, 0.0, gateReviews(t, s, "admission", "refused"))

	// Shown in the upgrade checks of its cluster and of every cluster,
	// at every target, and not in another cluster's.
	want := []sunsetv1.GateOverride{{Time: testNow, Cluster: "default", Source: "admission", Kind: "KubeadmControlPlane", Namespace: "fleet", Name: "default",
		User: "alice@example.com", Reason: "INC-4711: carol's job moves to v1 next week", From: "1.36.3", To: "1.37.0"}}
	require.Equal(t, want, getJSON[sunsetv1.UpgradeCheck](t, s, "/apis/sunset.dev/v1/upgradechecks/1.37?cluster=default").Status.GateOverrides)
	require.Nil(t, getJSON[sunsetv1.UpgradeCheck](t, s, "/apis/sunset.dev/v1/upgradechecks/1.37?cluster=staging").Status.GateOverrides)
	checks := getJSON[sunsetv1.UpgradeCheckList](t, s, "/apis/sunset.dev/v1/upgradechecks")
	require.NotEmpty(t, checks.Items)
	for _, c := range checks.Items {
		require.Equal(t, want, c.Status.GateOverrides, c.Metadata.Name)
	}

	// Kept in the store.
	s.stop()
	st, err := store.Open(store.Options{Dir: s.cfg.DataDir, ReadOnly: true, Logger: zerolog.Nop(), Now: func() time.Time { return testNow }})
	require.NoError(t, err)
	defer st.Close()
	kept, err := st.GateOverrides("default", testNow.Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, []store.GateOverride{{Time: testNow, Cluster: "default", Source: "admission", Kind: "KubeadmControlPlane", Namespace: "fleet", Name: "default",
		User: "alice@example.com", Reason: "INC-4711: carol's job moves to v1 next week", From: "1.36.3", To: "1.37.0"}}, kept)
}

// A body too large or not an AdmissionReview gets an AdmissionReview
// that says so, counted as an error with its time.
func TestGateUnreadableReview(t *testing.T) {
	s := start(t, gateConfig(t))
	code, body := s.post("/gate/admit", "application/json", []byte(`{"request":{"uid":"1","object":`+strings.Repeat(" ", 4<<20)+`}}`))
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.JSONEq(t, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false,"status":{"metadata":{},"status":"Failure",
		"message":"the AdmissionReview is larger than 4194304 bytes: send only objects that hold a Kubernetes version to this webhook","code":413}}}`, string(body))
	code, body = s.post("/gate/admit", "application/json", []byte(`<AdmissionReview/>`))
	require.Equal(t, http.StatusBadRequest, code)
	require.JSONEq(t, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false,"status":{"metadata":{},"status":"Failure",
		"message":"the body is not an admission.k8s.io/v1 AdmissionReview in JSON: invalid character '<' looking for beginning of value","code":400}}}`, string(body))
	require.Equal(t, 2.0, gateReviews(t, s, "admission", "error"))
	require.Equal(t, float64(testNow.Unix()), metricValue(t, s.reg, "sunset_gate_last_error_timestamp_seconds", nil))

	off := start(t, testConfig(t))
	code, _ = off.post("/gate/admit", "application/json", []byte(`{}`))
	require.Equal(t, http.StatusNotFound, code, "not served without gate.enabled")
}

// Cluster API's runtime client over HTTPS: Discovery lists both
// handlers; a raise is held (retryAfterSeconds) with the verdict's
// message, a patch step goes on.
func TestGateClusterAPIHooks(t *testing.T) {
	cfg := gateConfig(t)
	cfg.CertDir = filepath.Join(t.TempDir(), "certs")
	cfg.Gate.RetryAfter = 2 * time.Minute
	s := start(t, cfg)
	require.True(t, s.app.TLS())
	ca, err := os.ReadFile(filepath.Join(cfg.CertDir, selfsigned.CAFile))
	require.NoError(t, err)
	client := trusting(t, ca)
	s.url, s.client = "https://"+s.app.Addr().String(), client
	postCheckFixture(s)
	base := "https://" + s.app.Addr().String() + "/gate/capi/hooks.runtime.cluster.x-k8s.io/v1alpha1/"
	// As Cluster API's runtime client does: the request's kind set, JSON,
	// POST.
	call := func(path, kind string, req runtime.Object, resp any) {
		t.Helper()
		req.GetObjectKind().SetGroupVersionKind(hooksv1.GroupVersion.WithKind(kind))
		body, err := json.Marshal(req)
		require.NoError(t, err)
		r, err := client.Post(base+path, "application/json", strings.NewReader(string(body)))
		require.NoError(t, err)
		defer r.Body.Close()
		require.Equal(t, http.StatusOK, r.StatusCode)
		require.NoError(t, json.NewDecoder(r.Body).Decode(resp))
	}

	var disc hooksv1.DiscoveryResponse
	call("discovery", "DiscoveryRequest", &hooksv1.DiscoveryRequest{}, &disc)
	require.Equal(t, hooksv1.ResponseStatusSuccess, disc.Status)
	require.Len(t, disc.Handlers, 2)
	for i, hook := range []string{"BeforeClusterUpgrade", "BeforeControlPlaneUpgrade"} {
		h := disc.Handlers[i]
		require.Equal(t, "sunset-gate", h.Name)
		require.Equal(t, hooksv1.GroupVersionHook{APIVersion: "hooks.runtime.cluster.x-k8s.io/v1alpha1", Hook: hook}, h.RequestHook)
		require.Equal(t, int32(10), *h.TimeoutSeconds)
		require.Equal(t, hooksv1.FailurePolicyIgnore, *h.FailurePolicy)
	}

	cluster := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "fleet", Labels: map[string]string{"team": "platform"}},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{Version: "v1.37.0", ClassRef: clusterv1.ClusterClassRef{Name: "quick-start"}}}}
	var up hooksv1.BeforeClusterUpgradeResponse
	call("beforeclusterupgrade/sunset-gate", "BeforeClusterUpgradeRequest", &hooksv1.BeforeClusterUpgradeRequest{Cluster: cluster, FromKubernetesVersion: "v1.36.3", ToKubernetesVersion: "v1.37.0",
		ControlPlaneUpgrades: []hooksv1.UpgradeStepInfo{{Version: "v1.37.0"}}}, &up)
	require.Equal(t, hooksv1.CommonRetryResponse{CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess, Message: refusedAt137(t, s, "Cluster")},
		RetryAfterSeconds: 120}, up.CommonRetryResponse)

	var cp hooksv1.BeforeControlPlaneUpgradeResponse
	call("beforecontrolplaneupgrade/sunset-gate", "BeforeControlPlaneUpgradeRequest", &hooksv1.BeforeControlPlaneUpgradeRequest{Cluster: cluster, FromKubernetesVersion: "v1.37.0", ToKubernetesVersion: "v1.37.1"}, &cp)
	require.Equal(t, hooksv1.CommonRetryResponse{CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess}}, cp.CommonRetryResponse)

	cluster.Annotations = map[string]string{"sunset.dev/upgrade-override": "INC-4711"}
	call("beforecontrolplaneupgrade/sunset-gate", "BeforeControlPlaneUpgradeRequest", &hooksv1.BeforeControlPlaneUpgradeRequest{Cluster: cluster, FromKubernetesVersion: "v1.36.3", ToKubernetesVersion: "v1.37.0"}, &cp)
	require.Equal(t, int32(0), cp.RetryAfterSeconds)
	require.Equal(t, `sunset: allowed by sunset.dev/upgrade-override "INC-4711"; without it: `+refusedAt137(t, s, "Cluster"), cp.Message)
	require.Equal(t, 1.0, gateReviews(t, s, "capi", "refused"))
	require.Equal(t, 1.0, gateReviews(t, s, "capi", "allowed"))
	require.Equal(t, 1.0, gateReviews(t, s, "capi", "overridden"))
}

// With gate.cleanFor, a caller silent that long counts as fixed: carol
// last called storage v1beta1 at 07:00, so 6h later the raise passes.
func TestGateCleanFor(t *testing.T) {
	cfg := gateConfig(t)
	cfg.Gate.CleanFor = 6 * time.Hour
	s := start(t, cfg)
	postCheckFixture(s)
	capi := clusterObjects[0]
	resp := admitted(t, s, review(t, capi, admissionv1.Update, capi.object("default", "v1.36.3"), capi.object("default", "v1.37.0")))
	require.True(t, resp.Allowed)
	require.Equal(t, "sunset: storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass: every caller has stopped or is exempted", resp.Warnings[0])
	require.Equal(t, "sunset: allowed: nothing removed by 1.37 is still called", resp.Warnings[len(resp.Warnings)-1])
	require.Equal(t, 1.0, gateReviews(t, s, "admission", "warned"))
}

// Exemptions apply to the gate as to upgradechecks: carol's exempted
// storage v1beta1 calls do not refuse the raise to 1.37.
func TestGateExemptions(t *testing.T) {
	cfg := gateConfig(t)
	cfg.Exemptions = []config.ExemptionConfig{{API: "volumeattributesclasses.v1beta1.storage.k8s.io", User: "carol", Reason: "vendor fix in Q1", Expires: "2027-01-01"}}
	s := start(t, cfg)
	postCheckFixture(s)
	check := getJSON[sunsetv1.UpgradeCheck](t, s, "/apis/sunset.dev/v1/upgradechecks/1.37?cluster=default&from=1.36")
	require.Equal(t, sunsetv1.ExitCodeSafe, check.Status.ExitCode)
	capi := clusterObjects[0]
	resp := admitted(t, s, review(t, capi, admissionv1.Update, capi.object("default", "v1.36.3"), capi.object("default", "v1.37.0")))
	require.True(t, resp.Allowed)
	require.Equal(t, "sunset: storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass: every caller has stopped or is exempted", resp.Warnings[0])
}

// One update cannot raise the version and rename the object's cluster to
// one Sunset never heard: the object is judged as the cluster it stood
// for before the change.
func TestGateJudgesTheClusterBeforeTheChange(t *testing.T) {
	s := start(t, gateConfig(t))
	postCheckFixture(s)
	c := clusterObjects[0]
	obj := c.object("default", c.to)
	obj["metadata"].(map[string]any)["labels"] = map[string]any{"sunset.dev/cluster": "never-heard"}
	resp := admitted(t, s, review(t, c, admissionv1.Update, c.object("default", c.from), obj))
	require.False(t, resp.Allowed)
	require.Equal(t, refusedAt137(t, s, c.kind), resp.Result.Message)
	require.Equal(t, 1.0, gateReviews(t, s, "admission", "refused"))
}
