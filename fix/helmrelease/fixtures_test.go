package helmrelease_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/fix/helmrelease"
	"github.com/kube-sunset/sunset/fix/helmrelease/helmstore"
)

// recordName is the key Helm's storage gives a revision's record.
func recordName(release string, revision int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision)
}

const ns = "shop"

var (
	installed = time.Date(2022, 3, 4, 5, 6, 7, 0, time.UTC)
	upgraded  = time.Date(2023, 4, 5, 6, 7, 8, 0, time.UTC)
	fixedAt   = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
)

// configDoc is the release's ConfigMap, which no fix moves: the fixed
// manifest holds it byte for byte as it was.
const configDoc = `---
# Source: web/templates/config.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
data:
  greeting: hello
`

// pdbBody is the PodDisruptionBudget after its apiVersion, which is all
// its move changes.
const pdbBody = `kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: web
`

// The manifest as Helm stored it on a cluster that served policy/v1beta1
// and networking.k8s.io/v1beta1.
const oldManifest = configDoc + `---
# Source: web/templates/pdb.yaml
apiVersion: policy/v1beta1
` + pdbBody + `---
# Source: web/templates/ingress.yaml
apiVersion: networking.k8s.io/v1beta1
kind: Ingress
metadata:
  name: web
spec:
  rules:
  - host: web.example.com
    http:
      paths:
      - path: /
        backend:
          serviceName: web
          servicePort: 80
`

// The same, each object moved.
const newManifest = configDoc + `---
# Source: web/templates/pdb.yaml
apiVersion: policy/v1
` + pdbBody + `---
# Source: web/templates/ingress.yaml
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  rules:
  - host: web.example.com
    http:
      paths:
      - backend:
          service:
            name: web
            port:
              number: 80
        path: /
        pathType: ImplementationSpecific
`

const oldHook = `apiVersion: autoscaling/v2beta2
kind: HorizontalPodAutoscaler
metadata:
  name: web-hook
spec:
  maxReplicas: 3
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
`

const newHook = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web-hook
spec:
  maxReplicas: 3
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
`

var wantChanges = []helmrelease.Change{
	{Template: "web/templates/pdb.yaml", Kind: "PodDisruptionBudget", Name: "web", From: "policy/v1beta1", To: "policy/v1"},
	{Template: "web/templates/ingress.yaml", Kind: "Ingress", Name: "web", From: "networking.k8s.io/v1beta1", To: "networking.k8s.io/v1", Fields: []string{
		"spec.rules[0].http.paths[0].backend.service added",
		"spec.rules[0].http.paths[0].backend.serviceName removed",
		"spec.rules[0].http.paths[0].backend.servicePort removed",
		"spec.rules[0].http.paths[0].pathType added",
	}},
	{Template: "web/templates/hpa-hook.yaml", Kind: "HorizontalPodAutoscaler", Name: "web-hook", From: "autoscaling/v2beta2", To: "autoscaling/v2"},
}

// cluster is a fake clientset serving what Kubernetes 1.36 serves of the
// APIs the tests use.
func cluster(t *testing.T) *fake.Clientset {
	t.Helper()
	kube := fake.NewClientset()
	kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}, {Name: "secrets", Kind: "Secret"}}},
		{GroupVersion: "policy/v1", APIResources: []metav1.APIResource{{Name: "poddisruptionbudgets", Kind: "PodDisruptionBudget"},
			{Name: "poddisruptionbudgets/status", Kind: "PodDisruptionBudget"}}},
		{GroupVersion: "networking.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "ingresses", Kind: "Ingress"}}},
		{GroupVersion: "storage.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "volumeattributesclasses", Kind: "VolumeAttributesClass"}}},
		{GroupVersion: "storage.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "volumeattributesclasses", Kind: "VolumeAttributesClass"}}},
		{GroupVersion: "autoscaling/v2", APIResources: []metav1.APIResource{{Name: "horizontalpodautoscalers", Kind: "HorizontalPodAutoscaler"}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment"}, {Name: "daemonsets", Kind: "DaemonSet"}}},
	}
	versioned(kube, "secrets")
	versioned(kube, "configmaps")
	return kube
}

// versioned makes the fake clientset keep resourceVersions of resource as
// the apiserver does: each write sets a new one, and an update naming
// another than the stored one is a conflict.
func versioned(kube *fake.Clientset, resource string) {
	var last int
	next := func(obj runtime.Object) metav1.Object {
		m, err := meta.Accessor(obj)
		if err != nil {
			panic(err)
		}
		last++
		m.SetResourceVersion(strconv.Itoa(last))
		return m
	}
	gvr := corev1.SchemeGroupVersion.WithResource(resource)
	kube.PrependReactor("create", resource, func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj := action.(k8stesting.CreateAction).GetObject().DeepCopyObject()
		next(obj)
		if err := kube.Tracker().Create(gvr, obj, action.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	kube.PrependReactor("update", resource, func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj := action.(k8stesting.UpdateAction).GetObject().DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		stored, err := kube.Tracker().Get(gvr, action.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		sm, err := meta.Accessor(stored)
		if err != nil {
			return true, nil, err
		}
		if rv := m.GetResourceVersion(); rv != "" && rv != sm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), m.GetName(), errors.New("the object has been modified"))
		}
		next(obj)
		if err := kube.Tracker().Update(gvr, obj, action.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
}

func fixer(t *testing.T, kube *fake.Clientset) *helmrelease.Fixer {
	t.Helper()
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	return &helmrelease.Fixer{Kube: kube, Records: helmstore.Records{}, Catalog: cat, Table: convert.New(cat), Now: func() time.Time { return fixedAt }}
}

// revision is a release record as Helm writes it.
func revision(version int, status rcommon.Status, manifest string, hooks ...*rspb.Hook) *rspb.Release {
	deployed := installed
	if version > 1 {
		deployed = upgraded
	}
	return &rspb.Release{Name: "web", Namespace: ns, Version: version, Manifest: manifest, Hooks: hooks,
		Info:   &rspb.Info{FirstDeployed: installed, LastDeployed: deployed, Status: status, Description: "Upgrade complete", Notes: "Visit web.example.com"},
		Chart:  &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "web", Version: "1.2.0"}},
		Config: map[string]any{"replicas": float64(2)},
		Labels: map[string]string{"team": "shop"}}
}

func hook(manifest string) *rspb.Hook {
	return &rspb.Hook{Name: "web-hook", Kind: "HorizontalPodAutoscaler", Path: "web/templates/hpa-hook.yaml", Manifest: manifest,
		Events: []rspb.HookEvent{rspb.HookPostUpgrade}}
}

// install writes revision 1, superseded, and revision 2, deployed, with
// Helm's own Secrets driver.
func install(t *testing.T, kube *fake.Clientset, manifest string, hooks ...*rspb.Hook) {
	t.Helper()
	d := driver.NewSecrets(kube.CoreV1().Secrets(ns))
	require.NoError(t, d.Create(recordName("web", 1), revision(1, rcommon.StatusSuperseded, manifest)))
	require.NoError(t, d.Create(recordName("web", 2), revision(2, rcommon.StatusDeployed, manifest, hooks...)))
}

// secrets returns every Secret of the namespace by name.
func secretsOf(t *testing.T, kube *fake.Clientset) map[string]corev1.Secret {
	t.Helper()
	l, err := kube.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]corev1.Secret{}
	for _, s := range l.Items {
		out[s.Name] = s
	}
	return out
}

// helmReads is what Helm's storage reads as the release's deployed
// revision, and the status of each revision.
func helmReads(t *testing.T, kube *fake.Clientset) (deployed *rspb.Release, history map[int]rcommon.Status) {
	t.Helper()
	s := storage.Init(driver.NewSecrets(kube.CoreV1().Secrets(ns)))
	d, err := s.Deployed("web")
	require.NoError(t, err)
	h, err := s.History("web")
	require.NoError(t, err)
	history = map[int]rcommon.Status{}
	for _, r := range h {
		r := r.(*rspb.Release)
		history[r.Version] = r.Info.Status
	}
	return d.(*rspb.Release), history
}

func findOne(t *testing.T, f *helmrelease.Fixer) helmrelease.Release {
	t.Helper()
	releases, err := f.Find(t.Context(), ns, "")
	require.NoError(t, err)
	require.Len(t, releases, 1)
	return releases[0]
}

// labelsWithout returns a record's labels with the timestamp label Helm's
// driver set, after checking it is between two times.
func labelsWithout(t *testing.T, labels map[string]string, key string, from, to time.Time) map[string]string {
	t.Helper()
	at, err := strconv.ParseInt(labels[key], 10, 64)
	require.NoError(t, err, "label %s", key)
	require.True(t, from.Unix() <= at && at <= to.Unix(), "label %s=%d between %d and %d", key, at, from.Unix(), to.Unix())
	out := map[string]string{}
	for k, v := range labels {
		if k != key {
			out[k] = v
		}
	}
	return out
}
