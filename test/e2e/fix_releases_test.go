package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// releaseFixer is the user `sunset fix releases` runs as.
const releaseFixer = "carol"

var fixReleasesChart = filepath.Join("testdata", "fixreleases", "web")

// The Ingress of release api as the chart renders it, and as a cluster
// serving networking.k8s.io/v1beta1 would have stored it.
const (
	ingressV1 = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: api
spec:
  rules:
  - host: api.example.com
    http:
      paths:
      - path: /
        pathType: ImplementationSpecific
        backend:
          service:
            name: api
            port:
              number: 80`
	ingressV1beta1 = `apiVersion: networking.k8s.io/v1beta1
kind: Ingress
metadata:
  name: api
spec:
  rules:
  - host: api.example.com
    http:
      paths:
      - path: /
        backend:
          serviceName: api
          servicePort: 80`
	// ingressFixed is what the fix writes: the converted object, its keys
	// in order.
	ingressFixed = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: api
spec:
  rules:
  - host: api.example.com
    http:
      paths:
      - backend:
          service:
            name: api
            port:
              number: 80
        path: /
        pathType: ImplementationSpecific`
	pdbV1      = "apiVersion: policy/v1\nkind: PodDisruptionBudget\n"
	pdbV1beta1 = "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\n"
)

// Two Helm releases installed with the Helm SDK on a real kube-apiserver,
// their stored revision then written as a cluster serving policy/v1beta1
// and networking.k8s.io/v1beta1 left it: helm upgrade fails on the stored
// manifest. `sunset fix releases` without RBAC is refused with what to
// grant; a dry run writes nothing; then it fixes one release, after which
// helm upgrade succeeds, and the other is fixed through two interrupted
// runs (killed before its new revision, then before superseding the old
// one), each leaving a release Helm reads as it was or as fixed, and a
// third run finishes it. The backups hold the original records byte for
// byte; restored from its backup with kubectl, as the docs say, a release
// is as it was, and fixing it again reuses the backup. The history is
// exact, and the fixer called only Secrets and discovery, nothing
// deprecated.
func TestFixReleasesMovesStoredRevisionsOffRemovedAPIs(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, "https://127.0.0.1:1/audit/webhook/e2e/apiserver-0", randomToken(t)))
	ctx := ctxWithin(t, 5*time.Minute)
	admin := a.as(t, "admin", "e2e-setup/1.0")
	adminKubeconfig := userKubeconfig(t, a, "admin", a.tokens["admin"])
	for _, ns := range []string{"shop", "edge"} {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, "creating namespace "+ns, err)
	}
	helmInstall(ctx, t, adminKubeconfig, "shop", "web", fixReleasesChart, map[string]any{})
	helmInstall(ctx, t, adminKubeconfig, "edge", "api", fixReleasesChart, map[string]any{"ingress": true})
	oldWeb := storeAsAnOldClusterDid(t, admin, "shop", "web", map[string]string{pdbV1: pdbV1beta1})
	oldAPI := storeAsAnOldClusterDid(t, admin, "edge", "api", map[string]string{pdbV1: pdbV1beta1, ingressV1: ingressV1beta1})

	for _, r := range [][2]string{{"shop", "web"}, {"edge", "api"}} {
		err := tryHelmUpgrade(ctx, t, adminKubeconfig, r[0], r[1], map[string]any{"ingress": r[1] == "api"})
		// Helm reads the stored manifest first; api's names both objects.
		for _, want := range []string{"unable to build kubernetes objects from current release manifest: ",
			`resource mapping not found for name: "` + r[1] + `" namespace: "" from "": no matches for kind "PodDisruptionBudget" in version "policy/v1beta1"`} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("helm upgrade %s before the fix: %v, want an error containing %q", r[1], err, want)
			}
		}
		if ingress := `no matches for kind "Ingress" in version "networking.k8s.io/v1beta1"`; strings.Contains(err.Error(), ingress) != (r[1] == "api") {
			t.Fatalf("helm upgrade %s before the fix: %v; want %q in it for api only", r[1], err, ingress)
		}
	}
	requireHistory(t, adminKubeconfig, "shop", "web", "1 deployed")
	requireHistory(t, adminKubeconfig, "edge", "api", "1 deployed")
	kubeconfig := userKubeconfig(t, a, releaseFixer, a.tokens[releaseFixer])
	fix := func(env []string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, sunsetBin, append([]string{"fix", "releases", "--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}

	// Without RBAC: refused, with what to grant.
	out, err := fix(nil, "--all-namespaces").Output()
	wantRefusal := `Grant list on secrets, e.g. a ClusterRole rule {apiGroups: [""], resources: ["secrets"], verbs: ["list"]}`
	if code := exitCode(err); code != 1 || !strings.Contains(stderrOf(err), wantRefusal) || len(out) != 0 {
		t.Fatalf("fix releases without RBAC: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and %q", code, out, stderrOf(err), wantRefusal)
	}
	grantFixReleases(ctx, t, admin)

	// A dry run says what it would do and writes nothing.
	before := allSecrets(ctx, t, admin)
	if len(before) != 2 {
		t.Fatalf("Secrets before the fix: %v, want the 2 release records", slices.Sorted(maps.Keys(before)))
	}
	out, err = fix(nil, "--all-namespaces", "--dry-run").Output()
	must(t, "fix releases --dry-run: "+stderrOf(err), err)
	apiChanges := "edge/api: PodDisruptionBudget/api: policy/v1beta1 -> policy/v1\n" +
		"edge/api: Ingress/api: networking.k8s.io/v1beta1 -> networking.k8s.io/v1 (fields: spec.rules[0].http.paths[0].backend.service added, " +
		"spec.rules[0].http.paths[0].backend.serviceName removed, spec.rules[0].http.paths[0].backend.servicePort removed, spec.rules[0].http.paths[0].pathType added)\n"
	webChanges := "shop/web: PodDisruptionBudget/web: policy/v1beta1 -> policy/v1\n"
	wantDry := apiChanges +
		"edge/api: would back up revision 1 as Secret sunset-backup.api.v1, write revision 2 with the replacements and mark revision 1 superseded (dry run: nothing written)\n" +
		webChanges +
		"shop/web: would back up revision 1 as Secret sunset-backup.web.v1, write revision 2 with the replacements and mark revision 1 superseded (dry run: nothing written)\n"
	if string(out) != wantDry {
		t.Fatalf("fix releases --dry-run printed:\n%s\nwant:\n%s", out, wantDry)
	}
	if after := allSecrets(ctx, t, admin); !maps.Equal(before, after) {
		t.Fatalf("Secrets after the dry run (name: resourceVersion): %v, want %v", after, before)
	}

	// api: fixed in one run; helm upgrade then succeeds. Its namespace
	// comes from HELM_NAMESPACE, as for helm: the kubeconfig's is default.
	out, err = fix([]string{"HELM_NAMESPACE=edge"}, "api").Output()
	must(t, "fix releases api: "+stderrOf(err), err)
	if want := apiChanges + "edge/api: revision 1 backed up as Secret sunset-backup.api.v1; revision 2 deployed with the replacements; revision 1 superseded\n"; string(out) != want {
		t.Fatalf("fix releases api printed:\n%s\nwant:\n%s", out, want)
	}
	requireBackup(ctx, t, admin, "edge", "api", 1, oldAPI)
	requireHistory(t, adminKubeconfig, "edge", "api", "1 superseded", "2 deployed")
	fixed := deployedManifest(t, adminKubeconfig, "edge", "api")
	if !strings.Contains(fixed, ingressFixed) || strings.Contains(fixed, "v1beta1") {
		t.Fatalf("api's revision 2 manifest:\n%s\nwant the Ingress as\n%s\nand no v1beta1", fixed, ingressFixed)
	}
	must(t, "helm upgrade api after the fix", tryHelmUpgrade(ctx, t, adminKubeconfig, "edge", "api", map[string]any{"ingress": true}))
	requireHistory(t, adminKubeconfig, "edge", "api", "1 superseded", "2 superseded", "3 deployed")

	// web: killed before its new revision is written. Only the backup
	// is: Helm reads the release as it was.
	killHeldFix(t, fix([]string{"SUNSET_TEST_HOLD_FIX_RELEASES=revision"}, "web", "-n", "shop"),
		"holding shop/web before its revision write (sh.helm.release.v1.web.v2)\n")
	requireBackup(ctx, t, admin, "shop", "web", 1, oldWeb)
	requireHistory(t, adminKubeconfig, "shop", "web", "1 deployed")
	if m := deployedManifest(t, adminKubeconfig, "shop", "web"); !strings.Contains(m, pdbV1beta1) {
		t.Fatalf("web's deployed manifest after a fix killed before its revision:\n%s\nwant it as it was", m)
	}

	// Killed before the old revision is marked superseded: two revisions
	// are deployed, and Helm reads the latest, the fixed one.
	killHeldFix(t, fix([]string{"SUNSET_TEST_HOLD_FIX_RELEASES=supersede"}, "web", "-n", "shop"),
		"holding shop/web before its supersede write (sh.helm.release.v1.web.v1)\n")
	requireHistory(t, adminKubeconfig, "shop", "web", "1 deployed", "2 deployed")
	if m := deployedManifest(t, adminKubeconfig, "shop", "web"); !strings.Contains(m, pdbV1) || strings.Contains(m, "v1beta1") {
		t.Fatalf("web's deployed manifest after a fix killed before superseding:\n%s\nwant the fixed one", m)
	}

	// Run again: it finishes.
	out, err = fix(nil, "--all-namespaces").Output()
	must(t, "fix releases again: "+stderrOf(err), err)
	wantAgain := "edge/api: revision 3 uses no API the cluster does not serve, nothing to do\n" +
		"shop/web: revision 2 uses no API the cluster does not serve, nothing to do; revision 1 marked superseded, left deployed by an interrupted fix\n"
	if string(out) != wantAgain {
		t.Fatalf("fix releases after the interruptions printed:\n%s\nwant:\n%s", out, wantAgain)
	}
	requireBackup(ctx, t, admin, "shop", "web", 1, oldWeb)
	requireHistory(t, adminKubeconfig, "shop", "web", "1 superseded", "2 deployed")

	// Restored as the docs say, with kubectl: revision 1 is its record as
	// it was, byte for byte, and deployed again.
	restoreFromBackup(ctx, t, adminKubeconfig, admin, "shop", "web", 1, 2, oldWeb)
	requireHistory(t, adminKubeconfig, "shop", "web", "1 deployed")
	// Fixed again: the backup, the same record, is kept as it is.
	out, err = fix(nil, "web", "-n", "shop").Output()
	must(t, "fix releases web after the restore: "+stderrOf(err), err)
	if want := webChanges + "shop/web: revision 1 backed up as Secret sunset-backup.web.v1; revision 2 deployed with the replacements; revision 1 superseded\n"; string(out) != want {
		t.Fatalf("fix releases web after the restore printed:\n%s\nwant:\n%s", out, want)
	}
	requireBackup(ctx, t, admin, "shop", "web", 1, oldWeb)
	requireHistory(t, adminKubeconfig, "shop", "web", "1 superseded", "2 deployed")
	must(t, "helm upgrade web after the fix", tryHelmUpgrade(ctx, t, adminKubeconfig, "shop", "web", map[string]any{}))
	requireHistory(t, adminKubeconfig, "shop", "web", "1 superseded", "2 superseded", "3 deployed")

	// Nothing left to do, and nothing written for it.
	before = allSecrets(ctx, t, admin)
	out, err = fix(nil, "--all-namespaces", "--target-version", "1.37").Output()
	must(t, "fix releases when all is fixed: "+stderrOf(err), err)
	if want := "edge/api: revision 3 uses no API removed by 1.37 or not served by the cluster, nothing to do\n" +
		"shop/web: revision 3 uses no API removed by 1.37 or not served by the cluster, nothing to do\n"; string(out) != want {
		t.Fatalf("fix releases when all is fixed printed:\n%s\nwant:\n%s", out, want)
	}
	if after := allSecrets(ctx, t, admin); !maps.Equal(before, after) || len(after) != 8 {
		t.Fatalf("Secrets after a run with nothing to do: %v, want the 6 records and 2 backups as before: %v", after, before)
	}

	checkReleaseFixerCalls(t, a.auditLog)
}

// storeAsAnOldClusterDid rewrites a release's revision 1 record, through
// Helm's own driver, with its manifest edited (each old text to the new),
// and returns the record's data as stored.
func storeAsAnOldClusterDid(t *testing.T, kube *kubernetes.Clientset, namespace, release string, edits map[string]string) []byte {
	t.Helper()
	d := driver.NewSecrets(kube.CoreV1().Secrets(namespace))
	key := "sh.helm.release.v1." + release + ".v1"
	r, err := d.Get(key)
	must(t, "reading "+key, err)
	rel := r.(*rspb.Release)
	for from, to := range edits {
		if n := strings.Count(rel.Manifest, from); n != 1 {
			t.Fatalf("%s's manifest holds %q %d times, want once:\n%s", release, from, n, rel.Manifest)
		}
		rel.Manifest = strings.Replace(rel.Manifest, from, to, 1)
	}
	must(t, "rewriting "+key, d.Update(key, rel))
	s, err := kube.CoreV1().Secrets(namespace).Get(t.Context(), key, metav1.GetOptions{})
	must(t, "reading "+key+" back", err)
	return s.Data["release"]
}

// tryHelmUpgrade upgrades a release with the chart, as helm upgrade does.
func tryHelmUpgrade(ctx context.Context, t *testing.T, kubeconfig, namespace, release string, values map[string]any) error {
	t.Helper()
	ch, err := loader.Load(fixReleasesChart)
	must(t, "loading the chart", err)
	upgrade := action.NewUpgrade(helmConfig(t, kubeconfig, namespace))
	upgrade.Namespace = namespace
	upgrade.WaitStrategy = kube.HookOnlyStrategy
	_, err = upgrade.RunWithContext(ctx, release, ch, values)
	return err
}

// requireHistory checks a release's revisions and statuses, as helm history
// lists them.
func requireHistory(t *testing.T, kubeconfig, namespace, release string, want ...string) {
	t.Helper()
	h, err := action.NewHistory(helmConfig(t, kubeconfig, namespace)).Run(release)
	must(t, "helm history "+release, err)
	var got []string
	for _, r := range h {
		rel := r.(*rspb.Release)
		got = append(got, fmt.Sprintf("%d %s", rel.Version, rel.Info.Status))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("helm history %s/%s: %v, want %v", namespace, release, got, want)
	}
}

// deployedManifest is the manifest of the revision Helm reads as deployed.
func deployedManifest(t *testing.T, kubeconfig, namespace, release string) string {
	t.Helper()
	cfg := helmConfig(t, kubeconfig, namespace)
	r, err := cfg.Releases.Deployed(release)
	must(t, "reading "+release+"'s deployed revision", err)
	return r.(*rspb.Release).Manifest
}

// requireBackup checks that the backup of a revision holds its record
// byte for byte, labelled as a backup and not as a revision.
func requireBackup(ctx context.Context, t *testing.T, kube *kubernetes.Clientset, namespace, release string, revision int, want []byte) {
	t.Helper()
	name := fmt.Sprintf("sunset-backup.%s.v%d", release, revision)
	b, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	must(t, "reading "+name, err)
	if string(b.Data["release"]) != string(want) || len(b.Data) != 1 {
		t.Fatalf("%s holds %d bytes (keys %v), want the %d of revision %d's record as it was", name, len(b.Data["release"]), slices.Sorted(maps.Keys(b.Data)), len(want), revision)
	}
	wantLabels := map[string]string{"app.kubernetes.io/managed-by": "sunset", "sunset.dev/backup-of-release": release, "sunset.dev/backup-of-revision": fmt.Sprint(revision)}
	if !maps.Equal(b.Labels, wantLabels) || b.Annotations["sunset.dev/backup-of"] != fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision) {
		t.Fatalf("%s: labels %v, annotations %v; want labels %v", name, b.Labels, b.Annotations, wantLabels)
	}
}

// allSecrets are the Secrets of the release namespaces, by
// namespace/name, with their resourceVersions.
func allSecrets(ctx context.Context, t *testing.T, kube *kubernetes.Clientset) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range []string{"shop", "edge"} {
		l, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		must(t, "listing Secrets", err)
		for _, s := range l.Items {
			out[ns+"/"+s.Name] = s.ResourceVersion
		}
	}
	return out
}

// restoreFromBackup restores a release's revision from its backup, as
// docs/fixing.md says: the revision the fix wrote is deleted, and the
// backup's record put back on the old one, labelled deployed.
func restoreFromBackup(ctx context.Context, t *testing.T, kubeconfig string, kube *kubernetes.Clientset, namespace, release string, revision, written int, want []byte) {
	t.Helper()
	record := fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision)
	for _, args := range [][]string{
		{"-n", namespace, "delete", "secret", fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, written)},
		{"-n", namespace, "get", "secret", fmt.Sprintf("sunset-backup.%s.v%d", release, revision), "-o", "jsonpath={.data.release}"},
	} {
		stdout, stderr, err := kubectlOut(t, kubeconfig, args...)
		must(t, "kubectl "+strings.Join(args, " ")+": "+stderr, err)
		if args[2] == "get" {
			patch := `{"data":{"release":"` + stdout + `"},"metadata":{"labels":{"status":"deployed"}}}`
			_, stderr, err = kubectlOut(t, kubeconfig, "-n", namespace, "patch", "secret", record, "--type=merge", "-p", patch)
			must(t, "kubectl patch secret "+record+": "+stderr, err)
		}
	}
	s, err := kube.CoreV1().Secrets(namespace).Get(ctx, record, metav1.GetOptions{})
	must(t, "reading "+record, err)
	if string(s.Data["release"]) != string(want) {
		t.Fatalf("%s after the restore holds %d bytes, not the %d of the record as it was", record, len(s.Data["release"]), len(want))
	}
}

// killHeldFix starts a fix held before a write, waits for it to say so,
// and kills it there.
func killHeldFix(t *testing.T, cmd *exec.Cmd, want string) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	must(t, "piping fix releases' standard error", err)
	must(t, "starting fix releases", cmd.Start())
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || line != want {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("held fix releases said %q (%v), want %q", line, err, want)
	}
	must(t, "killing fix releases", cmd.Process.Signal(syscall.SIGKILL))
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("held fix releases: %v, want killed by SIGKILL", err)
	}
}

// grantFixReleases gives the fixer what `fix releases` documents it needs
// for Helm's default driver.
func grantFixReleases(ctx context.Context, t *testing.T, admin *kubernetes.Clientset) {
	t.Helper()
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-release-fixer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "get", "create", "update"}},
	}}, metav1.CreateOptions{})
	must(t, "creating ClusterRole e2e-release-fixer", err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-release-fixer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-release-fixer"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: releaseFixer}}}, metav1.CreateOptions{})
	must(t, "binding e2e-release-fixer", err)
}

// checkReleaseFixerCalls reads the apiserver's audit log: the fixer
// called only core/v1 Secrets and discovery, no deprecated API, and wrote
// exactly the records and backups of the two fixes.
func checkReleaseFixerCalls(t *testing.T, auditLog string) {
	t.Helper()
	writes := map[string]int{}
	var other, deprecated []string
	eachCompleted(t, auditLog, func(ev *auditEvent) {
		if ev.User.Username != releaseFixer {
			return
		}
		if _, ok := ev.Annotations["k8s.io/deprecated"]; ok {
			deprecated = append(deprecated, ev.Verb+" "+ev.RequestURI)
		}
		switch ref := ev.ObjectRef; {
		case ref == nil && (ev.RequestURI == "/api" || ev.RequestURI == "/apis" || strings.HasPrefix(ev.RequestURI, "/api?") || strings.HasPrefix(ev.RequestURI, "/apis?") ||
			strings.HasPrefix(ev.RequestURI, "/api/") || strings.HasPrefix(ev.RequestURI, "/apis/")):
		case ref != nil && ref.Resource == "secrets" && ref.APIGroup == "" && ref.APIVersion == "v1":
			if (ev.Verb == "create" || ev.Verb == "update") && ev.ResponseStatus != nil && ev.ResponseStatus.Code < 300 {
				writes[ev.Verb]++
			}
		default:
			other = append(other, ev.Verb+" "+ev.RequestURI)
		}
	})
	// Creates: 2 backups, 3 new revisions (web's twice, the first before
	// the restore); updates: 3 old revisions superseded.
	if want := map[string]int{"create": 5, "update": 3}; !maps.Equal(writes, want) || len(other) > 0 || len(deprecated) > 0 {
		t.Fatalf("audit log: %s wrote %v (want %v), called beside Secrets and discovery: %v, deprecated: %v", releaseFixer, writes, want, other, deprecated)
	}
}
