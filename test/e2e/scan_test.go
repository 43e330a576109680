package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// scanFinding is the part of a `sunset scan -o json` finding the test
// compares.
type scanFinding struct {
	Severity       string `json:"severity"`
	Rule           string `json:"rule"`
	APIVersion     string `json:"apiVersion"`
	Kind           string `json:"kind"`
	Name           string `json:"name"`
	Namespace      string `json:"namespace"`
	AlreadyRemoved bool   `json:"alreadyRemoved"`
	Origin         struct {
		Release  string `json:"release"`
		Revision int    `json:"revision"`
		Template string `json:"template"`
		Object   string `json:"object"`
	} `json:"origin"`
}

type scanResult struct {
	CurrentVersion string `json:"currentVersion"`
	Scanned        struct {
		HelmReleases int `json:"helmReleases"`
		CRDs         int `json:"customResourceDefinitions"`
		APIServices  int `json:"apiServices"`
	} `json:"scanned"`
	Findings   []scanFinding `json:"findings"`
	NotScanned []struct {
		Resource, Namespace, Reason string
	} `json:"notScanned"`
	Errors []struct{ Path, Error string } `json:"errors"`
}

// A real kube-apiserver holds Helm releases installed and upgraded with the
// Helm SDK, a CRD that still stores objects at a deprecated version, and an
// APIService for a removed group version. A user who may not read Secrets
// in one namespace scans it with `sunset scan --kubeconfig`: the scan
// reports exactly the latest deployed revisions' findings, the CRD and the
// APIService, names the namespace it could not read, and nothing from
// stale revisions.
func TestScanAClusterAsAUserWithPartialAccess(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	// The audit webhook goes nowhere: this test reads no traffic.
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, "https://127.0.0.1:1/audit/webhook/e2e/apiserver-0", randomToken(t)))
	ctx := ctxWithin(t, 5*time.Minute)
	admin := a.as(t, "admin", "e2e-setup/1.0")
	for _, ns := range []string{"shop", "legacy", "vault"} {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, "creating namespace "+ns, err)
	}

	adminKubeconfig := userKubeconfig(t, a, "admin", a.tokens["admin"])
	chartDir := filepath.Join("testdata", "scan", "app")
	// shop: revision 1 is clean, revision 2 adds v1 Endpoints (deprecated).
	helmInstall(ctx, t, adminKubeconfig, "shop", "shop", chartDir, map[string]any{})
	helmUpgrade(ctx, t, adminKubeconfig, "shop", "shop", chartDir, map[string]any{"endpoints": true})
	// old: revision 1 used storage.k8s.io/v1beta1 (removed in 1.37);
	// revision 2, the deployed one, no longer does.
	helmInstall(ctx, t, adminKubeconfig, "legacy", "old", chartDir, map[string]any{"betaVolumeClass": true})
	helmUpgrade(ctx, t, adminKubeconfig, "legacy", "old", chartDir, map[string]any{"betaVolumeClass": false})
	// hidden: deprecated, in the namespace the scanning user may not read.
	helmInstall(ctx, t, adminKubeconfig, "vault", "hidden", chartDir, map[string]any{"endpoints": true})

	dyn, err := dynamic.NewForConfig(a.config(a.tokens["admin"], "e2e-setup/1.0"))
	must(t, "dynamic client", err)
	storedAtDeprecatedVersion(ctx, t, dyn)
	apiServices := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	_, err = dyn.Resource(apiServices).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v2beta2.autoscaling"},
		"spec": map[string]any{"group": "autoscaling", "version": "v2beta2", "groupPriorityMinimum": int64(1000), "versionPriority": int64(5),
			"insecureSkipTLSVerify": true, "service": map[string]any{"namespace": "default", "name": "leftover-adapter"}},
	}}, metav1.CreateOptions{})
	must(t, "creating the leftover APIService", err)
	all, err := dyn.Resource(apiServices).List(ctx, metav1.ListOptions{})
	must(t, "listing APIServices", err)

	grantScanAccessExcept(ctx, t, a, "victor", "vault")
	out, err := exec.CommandContext(ctx, sunsetBin, "scan", "--kubeconfig", userKubeconfig(t, a, "victor", a.tokens["victor"]),
		"--target-version", "1.37", "-o", "json").Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("sunset scan: %v, want exit code 3; stdout:\n%s\nstderr:\n%s", err, out, stderrOf(err))
	}
	var res scanResult
	must(t, "decoding the scan", json.Unmarshal(out, &res))

	want := []string{
		"removed apiservice apiregistration.k8s.io/v1 APIService v2beta2.autoscaling already=true apiservices/v2beta2.autoscaling",
		"deprecated crd-stored-version scan.example.com/v1beta1 Gizmo gizmos.scan.example.com already=false customresourcedefinitions/gizmos.scan.example.com",
		"deprecated deprecated-api v1 Endpoints shop/shop-external already=false helm release shop/shop revision 2: app/templates/endpoints.yaml",
	}
	var got []string
	for _, f := range res.Findings {
		name := f.Name
		if f.Namespace != "" {
			name = f.Namespace + "/" + f.Name
		}
		where := f.Origin.Object
		if f.Origin.Release != "" {
			where = "helm release " + f.Origin.Release + " revision " + strconv.Itoa(f.Origin.Revision) + ": " + f.Origin.Template
		}
		got = append(got, strings.Join([]string{f.Severity, f.Rule, f.APIVersion, f.Kind, name, "already=" + strconv.FormatBool(f.AlreadyRemoved), where}, " "))
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(res.NotScanned) != 1 || res.NotScanned[0].Resource != "secrets" || res.NotScanned[0].Namespace != "vault" ||
		!strings.Contains(res.NotScanned[0].Reason, `User "victor" cannot list resource "secrets"`) {
		t.Errorf("not scanned: %+v, want secrets in vault, forbidden to victor", res.NotScanned)
	}
	if len(res.Errors) != 0 {
		t.Errorf("errors: %+v", res.Errors)
	}
	if res.CurrentVersion != "1.36" || res.Scanned.HelmReleases != 2 || res.Scanned.CRDs != 1 || res.Scanned.APIServices != len(all.Items) {
		t.Errorf("scanned %+v at %s, want 2 Helm releases, 1 CRD and %d APIServices at 1.36", res.Scanned, res.CurrentVersion, len(all.Items))
	}

	// The server's own scan, with the same credentials, joins its upgrade
	// checks with the same findings.
	t.Setenv("KUBECONFIG", userKubeconfig(t, a, "victor", a.tokens["victor"]))
	t.Setenv("SUNSET_SCAN_INTERVAL", "1m")
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	check := awaitUpgradeCheckScan(t, "the server's first cluster scan", listen,
		start(t, "sunset", sunsetBin, "serve", "--data-dir", t.TempDir(), "--listen", listen))
	if check.ExitCode != 3 || len(check.Scan.Findings) != len(want) || len(check.Scan.NotScanned) != 1 {
		t.Errorf("the server's upgrade check: exit %d, %d findings, %d not scanned; want 3, %d and 1",
			check.ExitCode, len(check.Scan.Findings), len(check.Scan.NotScanned), len(want))
	}
}

// upgradeCheck is the part of an UpgradeCheck's status the scan tests read.
type upgradeCheck struct {
	ExitCode int         `json:"exitCode"`
	Scan     *scanResult `json:"scan"`
}

// awaitUpgradeCheckScan waits until the server at listen answers the 1.37
// upgrade check with a scan in it, and returns that check's status.
func awaitUpgradeCheckScan(t *testing.T, what, listen string, server *process) upgradeCheck {
	t.Helper()
	var check struct {
		Status upgradeCheck `json:"status"`
	}
	waitFor(t, what, time.Minute, func() error {
		if server.exited() {
			t.Fatalf("sunset serve exited (%v):\n%s", server.err, tail(server.log, 40))
		}
		resp, err := http.Get("http://" + listen + "/apis/sunset.dev/v1/upgradechecks/1.37")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&check); err != nil {
			return err
		}
		if check.Status.Scan == nil {
			return errors.New("no scan in the upgrade check yet")
		}
		return nil
	})
	return check.Status
}

func helmConfig(t *testing.T, kubeconfig, namespace string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	cfg := action.NewConfiguration()
	must(t, "helm configuration", cfg.Init(flags, namespace, "secret"))
	return cfg
}

func helmInstall(ctx context.Context, t *testing.T, kubeconfig, namespace, release, chartDir string, values map[string]any) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	must(t, "loading the chart", err)
	install := action.NewInstall(helmConfig(t, kubeconfig, namespace))
	install.ReleaseName, install.Namespace = release, namespace
	// Nothing runs the objects here (no controllers); applied is enough.
	install.WaitStrategy = kube.HookOnlyStrategy
	_, err = install.RunWithContext(ctx, ch, values)
	must(t, "helm install "+release, err)
}

func helmUpgrade(ctx context.Context, t *testing.T, kubeconfig, namespace, release, chartDir string, values map[string]any) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	must(t, "loading the chart", err)
	upgrade := action.NewUpgrade(helmConfig(t, kubeconfig, namespace))
	upgrade.Namespace = namespace
	upgrade.WaitStrategy = kube.HookOnlyStrategy
	_, err = upgrade.RunWithContext(ctx, release, ch, values)
	must(t, "helm upgrade "+release, err)
}

// storedAtDeprecatedVersion creates a CRD that stores at v1beta1, then
// moves storage to v1 and marks v1beta1 deprecated: kube-apiserver keeps
// v1beta1 in status.storedVersions, as it does until a migration.
func storedAtDeprecatedVersion(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := deprecatedCRD("scan.example.com", "Gizmo")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	versions[0].(map[string]any)["storage"], versions[0].(map[string]any)["deprecated"] = true, false
	versions[1].(map[string]any)["storage"] = false
	must(t, "editing the CRD", unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"))
	_, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{})
	must(t, "creating the gizmos CRD", err)

	// The apiserver's controllers write the new CRD's status meanwhile.
	var updated *unstructured.Unstructured
	updated = storeAtSecondVersion(ctx, t, dyn, crd.GetName(), "gizmos")
	stored, _, _ := unstructured.NestedStringSlice(updated.Object, "status", "storedVersions")
	if !slices.Equal(stored, []string{"v1beta1", "v1"}) {
		t.Fatalf("storedVersions = %v, want [v1beta1 v1]", stored)
	}
}

// grantScanAccessExcept lets user list what a cluster scan reads, and
// Secrets in every namespace but one.
func grantScanAccessExcept(ctx context.Context, t *testing.T, a *apiserver, user, hidden string) {
	t.Helper()
	admin := a.as(t, "admin", "e2e-setup/1.0")
	subject := []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}
	for name, rules := range map[string][]rbacv1.PolicyRule{
		"e2e-scanner": {
			{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps"}, Verbs: []string{"list"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list"}},
			{APIGroups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices"}, Verbs: []string{"list"}},
		},
		"e2e-secret-lister": {{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}},
	} {
		_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		must(t, "creating ClusterRole "+name, err)
	}
	_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-scanner"},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-scanner"}, Subjects: subject}, metav1.CreateOptions{})
	must(t, "binding e2e-scanner", err)
	namespaces, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	must(t, "listing namespaces", err)
	for _, ns := range namespaces.Items {
		if ns.Name == hidden {
			continue
		}
		_, err := admin.RbacV1().RoleBindings(ns.Name).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-secret-lister"},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-secret-lister"}, Subjects: subject}, metav1.CreateOptions{})
		must(t, "letting "+user+" list secrets in "+ns.Name, err)
	}
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}

// storeAtSecondVersion makes a CRD's second version its storage version
// and deprecates the first, as an operator's upgrade does, and returns
// the CRD as updated.
func storeAtSecondVersion(ctx context.Context, t *testing.T, dyn dynamic.Interface, name, what string) *unstructured.Unstructured {
	t.Helper()
	var updated *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		versions, _, _ := unstructured.NestedSlice(got.Object, "spec", "versions")
		versions[0].(map[string]any)["storage"], versions[0].(map[string]any)["deprecated"] = false, true
		versions[1].(map[string]any)["storage"] = true
		if err := unstructured.SetNestedSlice(got.Object, versions, "spec", "versions"); err != nil {
			return err
		}
		updated, err = dyn.Resource(crdResource).Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
	must(t, "moving the "+what+"' storage to its second version", err)
	return updated
}
