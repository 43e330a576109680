package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// svmResource is the StorageVersionMigration API kube-apiserver v1.36
// serves when its StorageVersionMigrator feature gate is on.
var svmResource = schema.GroupVersionResource{Group: "storagemigration.k8s.io", Version: "v1beta1", Resource: "storageversionmigrations"}

// The same CRD as TestFixCRDStoredVersions, on a cluster that serves
// storagemigration.k8s.io and runs kube-controller-manager's storage
// version migrator. `sunset fix crd` hands the rewrite to a
// StorageVersionMigration, waits for the migrator to finish it, and trims
// storedVersions: every object is then stored at v1 in etcd, although the
// fixer wrote none of them itself, and v1beta1 can leave the CRD.
func TestFixCRDThroughStorageVersionMigration(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	controllerManagerBin := binary(t, "E2E_KUBE_CONTROLLER_MANAGER_BIN")
	p := newPKI(t)
	db := startEtcd(t, etcdBin, p)
	a := startAPIServer(t, apiserverBin, db, p, webhookKubeconfig(t, p, "https://127.0.0.1:1/audit/webhook/e2e/apiserver-0", randomToken(t)),
		"--feature-gates=StorageVersionMigrator=true")
	ctx := ctxWithin(t, 5*time.Minute)
	dyn, err := dynamic.NewForConfig(a.config(a.tokens["admin"], "e2e-setup/1.0"))
	must(t, "dynamic client", err)
	stored := etcdReader{db: db, client: p.httpsClient(db.certFile, db.keyFile)}
	want := createAtV1beta1ThenStoreAtV1(ctx, t, dyn, stored)

	// The migrator alone: the garbage collector's cache, which it reads,
	// and no other controller that could write the doohickeys.
	start(t, "kube-controller-manager", controllerManagerBin,
		"--kubeconfig="+userKubeconfig(t, a, "admin", a.tokens["admin"]),
		"--controllers=garbage-collector-controller,storage-version-migrator-controller",
		"--feature-gates=StorageVersionMigrator=true",
		"--leader-elect=false",
		"--secure-port=0",
		"--cert-dir="+t.TempDir())

	grantFixCRD(ctx, t, a)
	grantMigrations(ctx, t, a)
	kubeconfig := userKubeconfig(t, a, fixer, a.tokens[fixer])
	out, err := exec.CommandContext(ctx, sunsetBin, "fix", "crd", fixCRDName, "--kubeconfig", kubeconfig, "--method", "migration").Output()
	must(t, "fix crd --method migration: "+stderrOf(err), err)
	migration := "storageversionmigrations.storagemigration.k8s.io/sunset-" + fixCRDName + "-v1"
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	wantLast := fixCRDName + ": objects rewritten at v1 by " + migration + "; status.storedVersions [v1beta1 v1] -> [v1]"
	if len(lines) < 2 || lines[0] != fixCRDName+": "+migration+" created, waiting for a migrator to take it up" || lines[len(lines)-1] != wantLast {
		t.Fatalf("fix crd printed:\n%s\nwant the migration created first and, last:\n%s", out, wantLast)
	}
	if got := stored.versions(t); !equalJSON(got, map[string]int{fixGroup + "/v1": fixObjects}) {
		t.Fatalf("etcd after the migration: %v, want all %d at v1", got, fixObjects)
	}
	requireStoredVersions(ctx, t, dyn, "v1")
	requireObjectsUnchanged(ctx, t, dyn, want)
	svm, err := dyn.Resource(svmResource).Get(ctx, "sunset-"+fixCRDName+"-v1", metav1.GetOptions{})
	must(t, "reading the migration", err)
	if svm.GetLabels()["app.kubernetes.io/managed-by"] != "sunset" {
		t.Fatalf("the migration's labels: %v", svm.GetLabels())
	}
	dropV1beta1(ctx, t, dyn)

	var updates int
	var deprecated []string
	eachCompleted(t, a.auditLog, func(ev *auditEvent) {
		if ev.User.Username != fixer {
			return
		}
		if ev.Verb == "update" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "doohickeys" {
			updates++
		}
		if _, ok := ev.Annotations["k8s.io/deprecated"]; ok {
			deprecated = append(deprecated, ev.Verb+" "+ev.RequestURI)
		}
	})
	if updates != 0 || len(deprecated) > 0 {
		t.Fatalf("audit log: %s updated %d doohickeys itself (want 0: the migrator does), deprecated calls: %v", fixer, updates, deprecated)
	}
}

// grantMigrations lets the fixer create and follow StorageVersionMigrations.
func grantMigrations(ctx context.Context, t *testing.T, a *apiserver) {
	t.Helper()
	admin := a.as(t, "admin", "e2e-setup/1.0")
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-crd-migrations"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"storagemigration.k8s.io"}, Resources: []string{"storageversionmigrations"}, Verbs: []string{"get", "create", "delete"}},
	}}, metav1.CreateOptions{})
	must(t, "creating ClusterRole e2e-crd-migrations", err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-crd-migrations"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-crd-migrations"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: fixer}}}, metav1.CreateOptions{})
	must(t, "binding e2e-crd-migrations", err)
}
