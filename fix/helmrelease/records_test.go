package helmrelease_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/kube-sunset/sunset/fix/helmrelease"
)

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
