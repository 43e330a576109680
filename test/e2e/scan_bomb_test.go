package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxScanRSS is what a cluster scan may hold at its peak, whatever the
// cluster's Secrets say: docs/scanning.md's bound with room for the
// Kubernetes client's own lists.
const maxScanRSS = 320 << 20

// A Secret that anyone who may create Secrets can write, labelled as a Helm
// release, holds a gzip of a few hundred KB that inflates past 60 MiB. The
// cluster scan, from the CLI and from the workload that publishes it to
// the server, reports that release as too large, keeps the real release's
// finding, and stays within its memory bound. The server reads the
// published scan with nothing but get on one ConfigMap.
func TestClusterScanBoundsAHelmRecordBomb(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, "https://127.0.0.1:1/audit/webhook/e2e/apiserver-0", randomToken(t)))
	ctx := ctxWithin(t, 5*time.Minute)
	admin := a.as(t, "admin", "e2e-setup/1.0")
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	must(t, "creating namespace shop", err)
	adminKubeconfig := userKubeconfig(t, a, "admin", a.tokens["admin"])
	helmInstall(ctx, t, adminKubeconfig, "shop", "shop", filepath.Join("testdata", "scan", "app"), map[string]any{"endpoints": true})

	record := helmRecordBomb(t, 60<<20)
	if len(record) > 1<<20 {
		t.Fatalf("the bomb's record is %d bytes: too big for a Secret", len(record))
	}
	_, err = admin.CoreV1().Secrets("shop").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.bomb.v1",
			Labels: map[string]string{"owner": "helm", "name": "bomb", "status": "deployed", "version": "1"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": record},
	}, metav1.CreateOptions{})
	must(t, "creating the Helm record bomb", err)

	wantFinding := "deprecated deprecated-api v1 Endpoints shop/shop-external"
	wantError := "helm release shop/bomb: too large"
	checkScan := func(what string, res scanResult) {
		t.Helper()
		var got []string
		for _, f := range res.Findings {
			got = append(got, strings.Join([]string{f.Severity, f.Rule, f.APIVersion, f.Kind, f.Namespace + "/" + f.Name}, " "))
		}
		if len(got) != 1 || got[0] != wantFinding {
			t.Errorf("%s: findings %q, want only %q", what, got, wantFinding)
		}
		if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Path+": "+res.Errors[0].Error, wantError) {
			t.Errorf("%s: errors %+v, want one that says %q", what, res.Errors, wantError)
		}
	}

	// The CLI's scan.
	cmd := exec.CommandContext(ctx, sunsetBin, "scan", "--kubeconfig", adminKubeconfig, "--target-version", "1.37", "-o", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("sunset scan: %v, want exit code 1 (incomplete: one release could not be read); stderr:\n%s", err, stderr.String())
	}
	var res scanResult
	must(t, "decoding the scan", json.Unmarshal(out, &res))
	checkScan("sunset scan", res)
	requirePeakRSS(t, "sunset scan", cmd.ProcessState)

	// The scan's own workload publishes into a ConfigMap, as the shipped
	// CronJob does.
	_, err = admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sunset-cluster-scan"}}, metav1.CreateOptions{})
	must(t, "creating the scan's ConfigMap", err)
	publish := exec.CommandContext(ctx, sunsetBin, "publish-scan")
	publish.Env = append(os.Environ(), "KUBECONFIG="+adminKubeconfig, "SUNSET_SCAN_CONFIGMAP=default/sunset-cluster-scan")
	if out, err := publish.CombinedOutput(); err != nil {
		t.Fatalf("sunset publish-scan: %v\n%s", err, out)
	}
	requirePeakRSS(t, "sunset publish-scan", publish.ProcessState)

	// The server reads it as mallory, who may get that ConfigMap and
	// nothing else.
	_, err = admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "scan-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"sunset-cluster-scan"}, Verbs: []string{"get"}}}},
		metav1.CreateOptions{})
	must(t, "creating Role scan-reader", err)
	_, err = admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scan-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "scan-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "mallory"}}}, metav1.CreateOptions{})
	must(t, "binding scan-reader to mallory", err)
	t.Setenv("KUBECONFIG", userKubeconfig(t, a, "mallory", a.tokens["mallory"]))
	t.Setenv("SUNSET_SCAN_CONFIGMAP", "default/sunset-cluster-scan")
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	server := start(t, "sunset", sunsetBin, "serve", "--data-dir", t.TempDir(), "--listen", listen)
	check := awaitUpgradeCheckScan(t, "the server to read the published scan", listen, server)
	checkScan("the server's upgrade check", *check.Scan)
}

// helmRecordBomb is a Helm release record (base64 of a gzip of the JSON)
// whose manifest inflates to size bytes of ConfigMaps.
func helmRecordBomb(t *testing.T, size int) []byte {
	t.Helper()
	var gz bytes.Buffer
	w, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	must(t, "gzip", err)
	_, err = w.Write([]byte(`{"name":"bomb","namespace":"shop","version":1,"info":{"status":"deployed"},"chart":{"metadata":{"name":"bomb","version":"1.0.0"}},"manifest":"`))
	must(t, "gzip", err)
	doc := []byte(`---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: filler\n`)
	for n := 0; n < size; n += len(doc) {
		_, err = w.Write(doc)
		must(t, "gzip", err)
	}
	_, err = w.Write([]byte(`"}`))
	must(t, "gzip", err)
	must(t, "gzip", w.Close())
	return []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))
}

// requirePeakRSS fails the test if the finished process's resident set
// ever went over maxScanRSS.
func requirePeakRSS(t *testing.T, what string, ps *os.ProcessState) {
	t.Helper()
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatalf("%s: no resource usage", what)
	}
	peak := ru.Maxrss << 10 // kilobytes on Linux
	t.Logf("%s: peak RSS %d MiB", what, peak>>20)
	if peak > maxScanRSS {
		t.Errorf("%s: peak RSS %d MiB, over the bound of %d MiB", what, peak>>20, maxScanRSS>>20)
	}
}
