package helmrelease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fix/helmrelease"
)

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
