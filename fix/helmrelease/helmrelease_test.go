package helmrelease_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// The manifest as Helm stored it on a cluster that served policy/v1beta1
// and networking.k8s.io/v1beta1.
const oldManifest = `---
# Source: web/templates/config.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
data:
  greeting: hello
---
# Source: web/templates/pdb.yaml
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: web
---
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

// The same, each object moved; the ConfigMap is byte for byte as it was.
const newManifest = `---
# Source: web/templates/config.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
data:
  greeting: hello
---
# Source: web/templates/pdb.yaml
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: web
---
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

func TestFixWritesANewRevisionTheWayHelmDoes(t *testing.T) {
	kube := cluster(t)
	install(t, kube, oldManifest, hook(oldHook))
	before := secretsOf(t, kube)
	start := time.Now()
	res, err := fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	end := time.Now()
	require.NoError(t, err)
	res.Release = helmrelease.Release{}
	require.Equal(t, helmrelease.Result{Revision: 2, NewRevision: 3, Changes: wantChanges, Backup: "sunset-backup.web.v2", Superseded: []int{2}}, res)

	after := secretsOf(t, kube)
	require.Len(t, after, 4)
	require.Equal(t, before["sh.helm.release.v1.web.v1"], after["sh.helm.release.v1.web.v1"], "revision 1 is not touched")

	// The backup: revision 2's record byte for byte, which Helm does not
	// read as a revision.
	backup := after["sunset-backup.web.v2"]
	orig := before["sh.helm.release.v1.web.v2"]
	require.Equal(t, orig.Data, backup.Data)
	require.Equal(t, corev1.SecretType("helm.sh/release.v1"), backup.Type)
	require.Equal(t, map[string]string{"app.kubernetes.io/managed-by": "sunset", "sunset.dev/backup-of-release": "web", "sunset.dev/backup-of-revision": "2"}, backup.Labels)
	require.Equal(t, map[string]string{"sunset.dev/backup-of": "sh.helm.release.v1.web.v2",
		"sunset.dev/original-labels": `{"createdAt":"` + orig.Labels["createdAt"] + `","name":"web","owner":"helm","status":"deployed","team":"shop","version":"2"}`}, backup.Annotations)

	// Revision 3, as Helm's driver reads it back.
	want := revision(3, rcommon.StatusDeployed, newManifest, hook(newHook))
	want.Info.LastDeployed, want.Info.Description = fixedAt, helmrelease.Description
	got, err := driver.NewSecrets(kube.CoreV1().Secrets(ns)).Get(recordName("web", 3))
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, map[string]string{"name": "web", "owner": "helm", "status": "deployed", "version": "3", "team": "shop"},
		labelsWithout(t, after["sh.helm.release.v1.web.v3"].Labels, "createdAt", start, end))

	// Revision 2: only its status changed, as helm upgrade leaves it.
	want = revision(2, rcommon.StatusSuperseded, oldManifest, hook(oldHook))
	got, err = driver.NewSecrets(kube.CoreV1().Secrets(ns)).Get(recordName("web", 2))
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, map[string]string{"name": "web", "owner": "helm", "status": "superseded", "version": "2", "team": "shop", "createdAt": orig.Labels["createdAt"]},
		labelsWithout(t, after["sh.helm.release.v1.web.v2"].Labels, "modifiedAt", start, end))

	deployed, history := helmReads(t, kube)
	require.Equal(t, 3, deployed.Version)
	require.Equal(t, map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusSuperseded, 3: rcommon.StatusDeployed}, history)

	// Again: nothing to do, nothing written.
	res, err = fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	require.NoError(t, err)
	res.Release = helmrelease.Release{}
	require.Equal(t, helmrelease.Result{Revision: 3, UpToDate: true}, res)
	require.Equal(t, after, secretsOf(t, kube))
}

func TestDryRunWritesNothing(t *testing.T) {
	kube := cluster(t)
	install(t, kube, oldManifest, hook(oldHook))
	before := secretsOf(t, kube)
	f := fixer(t, kube)
	f.DryRun = true
	res, err := f.Fix(t.Context(), findOne(t, f))
	require.NoError(t, err)
	res.Release = helmrelease.Release{}
	require.Equal(t, helmrelease.Result{Revision: 2, NewRevision: 3, Changes: wantChanges, Backup: "sunset-backup.web.v2", Superseded: []int{2}}, res)
	require.Equal(t, before, secretsOf(t, kube))
}

// With a target, an API the cluster still serves but the target removes
// moves too; without one, it stays.
func TestTargetMovesWhatItRemoves(t *testing.T) {
	manifest := "---\n# Source: web/templates/class.yaml\napiVersion: storage.k8s.io/v1beta1\nkind: VolumeAttributesClass\nmetadata:\n  name: fast\ndriverName: csi.example.com\nparameters:\n  iops: \"3000\"\n"
	kube := cluster(t)
	install(t, kube, manifest)
	res, err := fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	require.NoError(t, err)
	require.True(t, res.UpToDate, "%+v", res)

	f := fixer(t, kube)
	f.Target = catalog.MustParseRelease("1.37")
	res, err = f.Fix(t.Context(), findOne(t, f))
	require.NoError(t, err)
	require.Equal(t, []helmrelease.Change{{Template: "web/templates/class.yaml", Kind: "VolumeAttributesClass", Name: "fast", From: "storage.k8s.io/v1beta1", To: "storage.k8s.io/v1"}}, res.Changes)
	deployed, _ := helmReads(t, kube)
	// A converted object is written with its keys in order, as
	// sigs.k8s.io/yaml writes them.
	require.Equal(t, "---\n# Source: web/templates/class.yaml\napiVersion: storage.k8s.io/v1\ndriverName: csi.example.com\nkind: VolumeAttributesClass\n"+
		"metadata:\n  name: fast\nparameters:\n  iops: \"3000\"\n", deployed.Manifest)
}

func TestRefusedReleaseIsLeftAsItIs(t *testing.T) {
	manifest := oldManifest + "---\n# Source: web/templates/psp.yaml\napiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: web\nspec:\n  privileged: false\n" +
		"---\n# Source: web/templates/widget.yaml\napiVersion: example.com/v1alpha1\nkind: Widget\nmetadata:\n  name: web\n"
	kube := cluster(t)
	install(t, kube, manifest, hook(oldHook))
	before := secretsOf(t, kube)
	_, err := fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	var refused *helmrelease.RefusedError
	require.ErrorAs(t, err, &refused)
	require.EqualError(t, err, "shop/web: revision 2 not fixed, 2 objects cannot move to a served API; the release is left as it is")
	var lines []string
	for _, o := range refused.Objects {
		lines = append(lines, o.Template+": "+o.String())
	}
	require.Equal(t, []string{
		"web/templates/psp.yaml: PodSecurityPolicy web (policy/v1beta1, not served by the cluster): convert: policy/v1beta1 PodSecurityPolicy not converted: " +
			"PodSecurityPolicy has no replacement; move its rules to Pod Security Admission or a policy engine",
		"web/templates/widget.yaml: Widget web (example.com/v1alpha1, not served by the cluster): the catalog names no replacement for it",
	}, lines)
	require.Equal(t, before, secretsOf(t, kube))
}

// A fix stopped before any of its writes leaves a release Helm reads as
// it was or as fixed; running it again finishes, to the same records as a
// fix never stopped.
func TestInterruptedFixLeavesTheReleaseAsItWasOrFixed(t *testing.T) {
	stop := errors.New("stopped")
	for _, tc := range []struct {
		step helmrelease.Step
		// wantDeployed is the revision Helm reads as deployed after the
		// stop; wantHistory every revision's status.
		wantDeployed int
		wantHistory  map[int]rcommon.Status
		// wantAgain is the second run's result.
		wantAgain helmrelease.Result
	}{
		{helmrelease.StepBackup, 2, map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusDeployed},
			helmrelease.Result{Revision: 2, NewRevision: 3, Changes: wantChanges, Backup: "sunset-backup.web.v2", Superseded: []int{2}}},
		{helmrelease.StepRevision, 2, map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusDeployed},
			helmrelease.Result{Revision: 2, NewRevision: 3, Changes: wantChanges, Backup: "sunset-backup.web.v2", Superseded: []int{2}}},
		{helmrelease.StepSupersede, 3, map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusDeployed, 3: rcommon.StatusDeployed},
			helmrelease.Result{Revision: 3, UpToDate: true, Superseded: []int{2}}},
	} {
		t.Run(string(tc.step), func(t *testing.T) {
			kube := cluster(t)
			install(t, kube, oldManifest, hook(oldHook))
			f := fixer(t, kube)
			var writes []string
			f.BeforeWrite = func(_ context.Context, r helmrelease.Release, step helmrelease.Step, object string) error {
				writes = append(writes, fmt.Sprintf("%s %s %s", r, step, object))
				if step == tc.step {
					return stop
				}
				return nil
			}
			_, err := f.Fix(t.Context(), findOne(t, f))
			require.ErrorIs(t, err, stop)
			deployed, history := helmReads(t, kube)
			require.Equal(t, tc.wantDeployed, deployed.Version)
			require.Equal(t, map[int]string{2: oldManifest, 3: newManifest}[tc.wantDeployed], deployed.Manifest)
			require.Equal(t, tc.wantHistory, history)

			f.BeforeWrite = nil
			res, err := f.Fix(t.Context(), findOne(t, f))
			require.NoError(t, err)
			res.Release = helmrelease.Release{}
			require.Equal(t, tc.wantAgain, res)
			deployed, history = helmReads(t, kube)
			require.Equal(t, 3, deployed.Version)
			require.Equal(t, newManifest, deployed.Manifest)
			require.Equal(t, map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusSuperseded, 3: rcommon.StatusDeployed}, history)
			require.Len(t, secretsOf(t, kube), 4)
		})
	}
}

func TestEveryWriteInOrder(t *testing.T) {
	kube := cluster(t)
	install(t, kube, oldManifest, hook(oldHook))
	f := fixer(t, kube)
	var writes []string
	f.BeforeWrite = func(_ context.Context, r helmrelease.Release, step helmrelease.Step, object string) error {
		writes = append(writes, fmt.Sprintf("%s %s %s", r, step, object))
		return nil
	}
	_, err := f.Fix(t.Context(), findOne(t, f))
	require.NoError(t, err)
	require.Equal(t, []string{
		"shop/web backup sunset-backup.web.v2",
		"shop/web revision sh.helm.release.v1.web.v3",
		"shop/web supersede sh.helm.release.v1.web.v2",
	}, writes)
}

func TestPendingOperationIsRefused(t *testing.T) {
	kube := cluster(t)
	install(t, kube, oldManifest, hook(oldHook))
	require.NoError(t, driver.NewSecrets(kube.CoreV1().Secrets(ns)).Create(recordName("web", 3), revision(3, rcommon.StatusPendingUpgrade, oldManifest)))
	before := secretsOf(t, kube)
	_, err := fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	require.EqualError(t, err, "shop/web: revision 3 is pending-upgrade: a helm install, upgrade or rollback is in progress, or was stopped. "+
		"Wait for it, or settle it with helm rollback, then run the fix again")
	require.Equal(t, before, secretsOf(t, kube))
}

// After a failed upgrade, the new revision comes after the failed one, as
// helm upgrade numbers it.
func TestNewRevisionFollowsAFailedOne(t *testing.T) {
	kube := cluster(t)
	install(t, kube, oldManifest, hook(oldHook))
	require.NoError(t, driver.NewSecrets(kube.CoreV1().Secrets(ns)).Create(recordName("web", 3), revision(3, rcommon.StatusFailed, oldManifest)))
	res, err := fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	require.NoError(t, err)
	require.Equal(t, 4, res.NewRevision)
	_, history := helmReads(t, kube)
	require.Equal(t, map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusSuperseded, 3: rcommon.StatusFailed, 4: rcommon.StatusDeployed}, history)
}

func TestABackupOfAnotherRecordIsNotOverwritten(t *testing.T) {
	kube := cluster(t)
	install(t, kube, oldManifest, hook(oldHook))
	_, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sunset-backup.web.v2", Namespace: ns},
		Data: map[string][]byte{"release": []byte("old")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	before := secretsOf(t, kube)
	_, err = fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	require.EqualError(t, err, "shop/web: Secret sunset-backup.web.v2 exists and holds another record than sh.helm.release.v1.web.v2; nothing was changed. "+
		"If it is an old backup no longer needed, delete it, then run the fix again")
	require.Equal(t, before, secretsOf(t, kube))
}

// A release kept in ConfigMaps (HELM_DRIVER=configmap) is fixed there, by
// Helm's ConfigMaps driver.
func TestConfigMapStore(t *testing.T) {
	kube := cluster(t)
	d := driver.NewConfigMaps(kube.CoreV1().ConfigMaps(ns))
	require.NoError(t, d.Create(recordName("web", 1), revision(1, rcommon.StatusDeployed, oldManifest)))
	before, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), recordName("web", 1), metav1.GetOptions{})
	require.NoError(t, err)
	f := fixer(t, kube)
	releases, err := f.Find(t.Context(), ns, "")
	require.NoError(t, err)
	require.Empty(t, releases, "Helm's default driver is secret")
	f.Driver = "configmap"
	r := findOne(t, f)
	require.Equal(t, "ConfigMap", r.Store)
	res, err := f.Fix(t.Context(), r)
	require.NoError(t, err)
	require.Equal(t, 2, res.NewRevision)
	s := storage.Init(driver.NewConfigMaps(kube.CoreV1().ConfigMaps(ns)))
	got, err := s.Deployed("web")
	require.NoError(t, err)
	require.Equal(t, newManifest, got.(*rspb.Release).Manifest)
	backup, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "sunset-backup.web.v1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, before.Data, backup.Data)
}

// A record that inflates past the scan's bound is not read: the release
// is reported, and left as it is.
func TestGzipBombIsRefused(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(`{"name":"` + strings.Repeat("a", 32<<20) + `"}`))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	kube := cluster(t)
	_, err = kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: recordName("web", 1), Namespace: ns, Labels: map[string]string{"owner": "helm", "name": "web", "version": "1", "status": "deployed"}},
		Type:       "helm.sh/release.v1", Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))}}, metav1.CreateOptions{})
	require.NoError(t, err)
	before := secretsOf(t, kube)
	_, err = fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	require.EqualError(t, err, "shop/web: Secret sh.helm.release.v1.web.v1: too large: the release record, decompressed, is larger than 32 MiB")
	require.Equal(t, before, secretsOf(t, kube))
}

// A write the apiserver refuses stops the release there, naming what to
// grant; Helm reads it as it was (the new revision refused) or as fixed
// (the old one's status refused), and a run with the grant finishes.
func TestRefusedWriteSaysWhatToGrant(t *testing.T) {
	for _, tc := range []struct {
		verb, name   string
		want         string
		wantDeployed int
		wantHistory  map[int]rcommon.Status
	}{
		{"create", "sh.helm.release.v1.web.v3",
			`shop/web: writing revision 3 (nothing of the release was changed but its backup sunset-backup.web.v2): create: failed to create: ` +
				`secrets "sh.helm.release.v1.web.v3" is forbidden: User "carol" cannot create resource "secrets" in API group "" in the namespace "shop". ` +
				`Grant create on secrets, e.g. a Role rule in namespace shop {apiGroups: [""], resources: ["secrets"], verbs: ["create"]}`,
			2, map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusDeployed}},
		{"update", "sh.helm.release.v1.web.v2",
			`shop/web: marking revision 2 superseded (Helm reads the fixed revision already; run the fix again to finish): update: failed to update: ` +
				`secrets "sh.helm.release.v1.web.v2" is forbidden: User "carol" cannot update resource "secrets" in API group "" in the namespace "shop". ` +
				`Grant update on secrets, e.g. a Role rule in namespace shop {apiGroups: [""], resources: ["secrets"], verbs: ["update"]}`,
			3, map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusDeployed, 3: rcommon.StatusDeployed}},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			kube := cluster(t)
			install(t, kube, oldManifest, hook(oldHook))
			refuse := true
			kube.PrependReactor(tc.verb, "secrets", func(action k8stesting.Action) (bool, runtime.Object, error) {
				// A create's and an update's action both carry the Secret.
				name := action.(k8stesting.CreateAction).GetObject().(*corev1.Secret).Name
				if !refuse || name != tc.name {
					return false, nil, nil
				}
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, name,
					fmt.Errorf(`User "carol" cannot %s resource "secrets" in API group "" in the namespace "shop"`, tc.verb))
			})
			_, err := fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
			require.EqualError(t, err, tc.want)
			deployed, history := helmReads(t, kube)
			require.Equal(t, tc.wantDeployed, deployed.Version)
			require.Equal(t, tc.wantHistory, history)

			refuse = false
			_, err = fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
			require.NoError(t, err)
			deployed, history = helmReads(t, kube)
			require.Equal(t, 3, deployed.Version)
			require.Equal(t, newManifest, deployed.Manifest)
			require.Equal(t, map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusSuperseded, 3: rcommon.StatusDeployed}, history)
		})
	}
}

// The record of a workload created through extensions/v1beta1 gets only
// what apps/v1 requires, the selector: the live object holds the old
// defaults already, and written into the record, the next helm upgrade's
// three-way merge would delete them from it.
func TestRecordGetsNoOldDefaults(t *testing.T) {
	manifest := "---\n# Source: web/templates/deploy.yaml\napiVersion: extensions/v1beta1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n" +
		"  template:\n    metadata:\n      labels:\n        app: web\n" +
		"---\n# Source: web/templates/agent.yaml\napiVersion: extensions/v1beta1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n" +
		"  template:\n    metadata:\n      labels:\n        app: agent\n"
	kube := cluster(t)
	install(t, kube, manifest)
	res, err := fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	require.NoError(t, err)
	require.Equal(t, []helmrelease.Change{
		{Template: "web/templates/deploy.yaml", Kind: "Deployment", Name: "web", From: "extensions/v1beta1", To: "apps/v1", Fields: []string{"spec.selector added"}},
		{Template: "web/templates/agent.yaml", Kind: "DaemonSet", Name: "agent", From: "extensions/v1beta1", To: "apps/v1", Fields: []string{"spec.selector added"}},
	}, res.Changes)
	deployed, _ := helmReads(t, kube)
	require.Equal(t, "---\n# Source: web/templates/deploy.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n"+
		"  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n"+
		"---\n# Source: web/templates/agent.yaml\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n"+
		"  selector:\n    matchLabels:\n      app: agent\n  template:\n    metadata:\n      labels:\n        app: agent\n", deployed.Manifest)
}

// A record written between the fix's read and its supersede (by a helm
// operation) is not overwritten: the update is made at the
// resourceVersion read, and the conflict is reported.
func TestSupersedeDoesNotOverwriteAConcurrentWrite(t *testing.T) {
	kube := cluster(t)
	install(t, kube, oldManifest, hook(oldHook))
	f := fixer(t, kube)
	f.BeforeWrite = func(ctx context.Context, _ helmrelease.Release, step helmrelease.Step, object string) error {
		if step != helmrelease.StepSupersede {
			return nil
		}
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, object, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Labels["team"] = "checkout"
		_, err = kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	}
	_, err := f.Fix(t.Context(), findOne(t, f))
	require.EqualError(t, err, "shop/web: Secret sh.helm.release.v1.web.v2 changed since it was read (a helm operation?), so revision 2 was not marked superseded; "+
		"Helm reads the fixed revision already. Run the fix again to finish")
	s, err := kube.CoreV1().Secrets(ns).Get(t.Context(), recordName("web", 2), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "checkout", s.Labels["team"])
	require.Equal(t, "deployed", s.Labels["status"])
}

// Find keeps only the names of the records it lists, not their data: what
// it returns for 40 records of 512 KiB each (20 MiB listed) stays under
// 1 MiB.
func TestFindKeepsNoRecordData(t *testing.T) {
	kube := cluster(t)
	data := bytes.Repeat([]byte("x"), 512<<10)
	for i := range 20 {
		name := fmt.Sprintf("app%d", i)
		for v, status := range []string{"superseded", "deployed"} {
			_, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: recordName(name, v+1), Namespace: ns,
					Labels: map[string]string{"owner": "helm", "name": name, "version": strconv.Itoa(v + 1), "status": status}},
				Type: "helm.sh/release.v1", Data: map[string][]byte{"release": data}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	f := fixer(t, kube)
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	releases, err := f.Find(t.Context(), ns, "")
	require.NoError(t, err)
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	require.Len(t, releases, 20)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	require.Less(t, kept, int64(1<<20), "bytes kept by Find's result")
	goruntime.KeepAlive(releases)
}

// A List's items move one by one, as Helm applies them; the List itself,
// which discovery does not serve, is never judged.
func TestListItemsMoveOneByOne(t *testing.T) {
	manifest := "---\n# Source: web/templates/list.yaml\napiVersion: v1\nkind: List\nitems:\n" +
		"- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: web\n" +
		"- apiVersion: policy/v1beta1\n  kind: PodDisruptionBudget\n  metadata:\n    name: web\n  spec:\n    minAvailable: 1\n    selector:\n      matchLabels:\n        app: web\n" +
		"---\n# Source: web/templates/roles.yaml\napiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: other\n"
	kube := cluster(t)
	install(t, kube, manifest)
	res, err := fixer(t, kube).Fix(t.Context(), findOne(t, fixer(t, kube)))
	require.NoError(t, err)
	require.Equal(t, []helmrelease.Change{{Template: "web/templates/list.yaml", Kind: "PodDisruptionBudget", Name: "web", From: "policy/v1beta1", To: "policy/v1"}}, res.Changes)
	deployed, _ := helmReads(t, kube)
	require.Equal(t, "---\n# Source: web/templates/list.yaml\napiVersion: v1\nitems:\n"+
		"- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: web\n"+
		"- apiVersion: policy/v1\n  kind: PodDisruptionBudget\n  metadata:\n    name: web\n  spec:\n    minAvailable: 1\n    selector:\n      matchLabels:\n        app: web\nkind: List\n"+
		"---\n# Source: web/templates/roles.yaml\napiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: other\n", deployed.Manifest)
}

// A record Helm's driver does not read (JSON with trailing data, which
// json.Unmarshal rejects) is refused as Helm skips it, and nothing is
// written; one Helm reads is read the same.
func TestRecordsAreReadAsHelmReadsThem(t *testing.T) {
	valid := `{"name":"web","version":1,"info":{"status":"deployed"},"manifest":"---\n# Source: web/templates/pdb.yaml\napiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  minAvailable: 1\n"}`
	gz := func(s string) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, err := zw.Write([]byte(s))
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name    string
		record  []byte
		wantErr string
	}{
		{"trailing data", []byte(valid + ` {}`), "shop/web: Secret sh.helm.release.v1.web.v1: the release record is not a Helm release: invalid character '{' after top-level value"},
		{"gzipped trailing data", gz(valid + `x`), "shop/web: Secret sh.helm.release.v1.web.v1: the release record is not a Helm release: invalid character 'x' after top-level value"},
		{"plain", []byte(valid), ""},
		{"gzipped", gz(valid), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := cluster(t)
			data := []byte(base64.StdEncoding.EncodeToString(tc.record))
			_, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: recordName("web", 1), Namespace: ns, Labels: map[string]string{"owner": "helm", "name": "web", "version": "1", "status": "deployed"}},
				Type:       "helm.sh/release.v1", Data: map[string][]byte{"release": data}}, metav1.CreateOptions{})
			require.NoError(t, err)
			_, helmErr := driver.NewSecrets(kube.CoreV1().Secrets(ns)).Get(recordName("web", 1))
			before := secretsOf(t, kube)
			f := fixer(t, kube)
			f.DryRun = true
			_, err = f.Fix(t.Context(), findOne(t, f))
			if tc.wantErr == "" {
				require.NoError(t, helmErr)
				require.NoError(t, err)
				return
			}
			require.Error(t, helmErr, "Helm's driver does not read it either")
			require.EqualError(t, err, tc.wantErr)
			require.Equal(t, before, secretsOf(t, kube))
		})
	}
}
