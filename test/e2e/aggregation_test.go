package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The manifests the aggregation test applies, as shipped.
const (
	shippedRBAC       = "../../deploy/kubernetes/base/rbac.yaml"
	shippedAPIService = "../../deploy/kubernetes/overlays/tls/apiservice.yaml"
	// The namespace and ServiceAccount the manifests name.
	sunsetNamespace = "sunset"
	sunsetAccount   = "sunset"
)

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// Sunset as an aggregated API: kube-apiserver runs with the front-proxy
// flags and serves sunset.dev/v1 through the shipped APIService; Sunset
// delegates authentication and authorization to it with the shipped RBAC,
// reading the client and front-proxy CAs from the cluster. kubectl, with
// users' own credentials, gets tables, YAML and jsonpath, is refused by
// RBAC, and resets; direct calls to Sunset are held to the same rules.
func TestAggregatedAPIThroughKubeAPIServer(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	kubectl := kubectlBinary(t)

	p := newPKI(t)
	token := randomToken(t)
	port := freePort(t)
	sunsetURL := "https://127.0.0.1:" + strconv.Itoa(port)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, sunsetURL+"/audit/webhook/"+clusterName+"/"+nodeName, token), frontProxyFlags(t)...)
	tr := prepare(t, a)
	ctx := ctxWithin(t, 5*time.Minute)

	// Sunset's identity is the shipped ServiceAccount and RBAC, with a
	// token for it, as a pod would have. victor's group may read through
	// the shipped sunset:view, not reset; mallory may do nothing.
	s := serveAggregated(ctx, t, a, tr.admin, p, sunsetBin, token, port)
	bindAuditorsToView(ctx, t, tr.admin)

	tr.round(ctx, 0)
	admin := userKubeconfig(t, a, "admin", a.tokens["admin"])
	run := func(kubeconfig string, args ...string) (string, error) {
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if err != nil {
			return errOut.String(), err
		}
		return out.String(), nil
	}
	// One round's deprecated requests, with no background noise: the
	// poller and the apiserver itself call endpoints.v1, so it is left out.
	wantRows := []string{
		"componentstatuses.v1 1",
		"cronjobs.v1beta1.batch 1.25 1",
		"volumeattributesclasses.v1beta1.storage.k8s.io 1.37 3",
		"widgets.v1beta1.e2e.example.com 8",
	}
	var table string
	waitFor(t, "kubectl get to show the round", 2*time.Minute, func() error {
		out, err := run(admin, "get", "apirequestcounts.sunset.dev", "--no-headers", "-o", "custom-columns=N:.metadata.name,R:.status.removedInRelease,C:.status.requestCount")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		got := stableRows(out, 3)
		if strings.Join(got, "\n") != strings.Join(wantRows, "\n") {
			return fmt.Errorf("rows %q", got)
		}
		table, err = run(admin, "get", "apirequestcounts.sunset.dev")
		return err
	})
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME REMOVEDINRELEASE REQUESTSINCURRENTHOUR REQUESTSINLAST24H" {
		t.Fatalf("kubectl get columns: %q", lines[0])
	}
	for _, want := range []string{"cronjobs.v1beta1.batch 1.25 1 1", "volumeattributesclasses.v1beta1.storage.k8s.io 1.37 3 3", "widgets.v1beta1.e2e.example.com 8 8"} {
		if !containsRow(lines, want) {
			t.Errorf("kubectl get: no row %q in\n%s", want, table)
		}
	}
	wide, err := run(admin, "get", "apirequestcounts.sunset.dev", "volumeattributesclasses.v1beta1.storage.k8s.io", "-o", "wide")
	must(t, "kubectl get -o wide", err)
	if !containsRow(strings.Split(wide, "\n"), "volumeattributesclasses.v1beta1.storage.k8s.io 1.37 3 3 storage.k8s.io/v1 VolumeAttributesClass carol") {
		t.Errorf("kubectl get -o wide:\n%s", wide)
	}

	// The OpenShift recipe, with only the resource name changed.
	out, err := run(admin, "get", "apirequestcounts.sunset.dev", "-o",
		`jsonpath={range .items[?(@.status.removedInRelease!="")]}{.status.removedInRelease}{"\t"}{.metadata.name}{"\n"}{end}`)
	must(t, "kubectl jsonpath", err)
	if want := "1.25\tcronjobs.v1beta1.batch\n1.37\tvolumeattributesclasses.v1beta1.storage.k8s.io\n"; out != want {
		t.Errorf("jsonpath recipe: %q, want %q", out, want)
	}
	out, err = run(admin, "get", "apirequestcounts.sunset.dev", "-l", "sunset.dev/removed-in-release=1.37", "-o", "name")
	must(t, "kubectl get -l", err)
	if want := "apirequestcount.sunset.dev/volumeattributesclasses.v1beta1.storage.k8s.io\n"; out != want {
		t.Errorf("label selector: %q, want %q", out, want)
	}
	out, err = run(admin, "get", "apirequestcounts.sunset.dev", "--field-selector", "metadata.name=componentstatuses.v1", "-o", "name")
	must(t, "kubectl get --field-selector", err)
	if want := "apirequestcount.sunset.dev/componentstatuses.v1\n"; out != want {
		t.Errorf("field selector: %q, want %q", out, want)
	}
	out, err = run(admin, "get", "apirequestcounts.sunset.dev", "widgets.v1beta1.e2e.example.com", "-o", "yaml")
	must(t, "kubectl get -o yaml", err)
	for _, want := range []string{"kind: APIRequestCount", "name: widgets.v1beta1.e2e.example.com", "sunset.dev/state: deprecated", "requestCount: 8"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get -o yaml lacks %q:\n%s", want, out)
		}
	}

	// RBAC, through kube-apiserver.
	mallory := userKubeconfig(t, a, "mallory", a.tokens["mallory"])
	victor := userKubeconfig(t, a, "victor", a.tokens["victor"])
	out, err = run(mallory, "get", "apirequestcounts.sunset.dev")
	expectRefusal(t, "mallory get", out, err, `apirequestcounts.sunset.dev is forbidden: User "mallory" cannot list resource "apirequestcounts" in API group "sunset.dev"`)
	out, err = run(victor, "get", "apirequestcounts.sunset.dev", "componentstatuses.v1", "-o", "name")
	must(t, "victor get: "+out, err)
	out, err = run(victor, "delete", "apirequestcounts.sunset.dev", "componentstatuses.v1")
	expectRefusal(t, "victor delete", out, err, `User "victor" cannot delete resource "apirequestcounts" in API group "sunset.dev"`)

	// Sunset's own authorization, called directly: kube-apiserver's checks
	// above do not prove it.
	base := sunsetURL + "/apis/sunset.dev/v1/apirequestcounts"
	victorCert, victorKey := p.issue(t, "victor-client", "victor", false, "auditors")
	malloryCert, malloryKey := p.issue(t, "mallory-client", "mallory", false, "visitors")
	proxyAsAdmin := map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
	for _, tc := range []struct {
		what    string
		client  *http.Client
		method  string
		bearer  string
		headers map[string]string
		want    int
	}{
		{"no credentials", s.client, "GET", "", nil, http.StatusUnauthorized},
		{"mallory's token", s.client, "GET", a.tokens["mallory"], nil, http.StatusForbidden},
		{"forged front-proxy headers", s.client, "GET", "", proxyAsAdmin, http.StatusUnauthorized},
		{"mallory's token and forged headers", s.client, "DELETE", a.tokens["mallory"], proxyAsAdmin, http.StatusForbidden},
		{"victor's token", s.client, "GET", a.tokens["victor"], nil, http.StatusOK},
		{"victor's token, reset", s.client, "DELETE", a.tokens["victor"], nil, http.StatusForbidden},
		{"victor's client certificate", p.httpsClient(victorCert, victorKey), "GET", "", nil, http.StatusOK},
		{"mallory's client certificate", p.httpsClient(malloryCert, malloryKey), "GET", "", nil, http.StatusForbidden},
		{"/metrics without credentials", s.client, "GET", "", nil, http.StatusUnauthorized},
	} {
		url := base
		if tc.method == "DELETE" {
			url += "/componentstatuses.v1"
		}
		if strings.HasPrefix(tc.what, "/metrics") {
			url = sunsetURL + "/metrics"
		}
		req, _ := http.NewRequest(tc.method, url, nil)
		if tc.bearer != "" {
			req.Header.Set("Authorization", "Bearer "+tc.bearer)
		}
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := tc.client.Do(req)
		must(t, tc.what, err)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("direct %s %s with %s: %d, want %d", tc.method, url, tc.what, resp.StatusCode, tc.want)
		}
	}

	// An admin resets through kube-apiserver; the API is then gone.
	out, err = run(admin, "delete", "apirequestcounts.sunset.dev", "componentstatuses.v1")
	must(t, "admin delete: "+out, err)
	if want := `apirequestcount.sunset.dev "componentstatuses.v1" deleted`; strings.TrimSpace(out) != want {
		t.Errorf("kubectl delete: %q, want %q", out, want)
	}
	out, err = run(admin, "get", "apirequestcounts.sunset.dev", "componentstatuses.v1")
	expectRefusal(t, "get after reset", out, err, `apirequestcounts.sunset.dev "componentstatuses.v1" not found`)

	checkCLIThroughKubeconfig(t, s, p.CAFile, admin, a.tokens["admin"])
}

// stableRows are the rows of `kubectl get` without endpoints.v1, whose
// counts the apiserver's own traffic moves, with fields joined by spaces.
func stableRows(out string, fields int) []string {
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "endpoints.v1" {
			continue
		}
		// custom-columns prints <none> for an empty field.
		var kept []string
		for _, v := range f[:min(fields, len(f))] {
			if v != "<none>" {
				kept = append(kept, v)
			}
		}
		rows = append(rows, strings.Join(kept, " "))
	}
	return rows
}

func containsRow(lines []string, want string) bool {
	for _, l := range lines {
		if strings.Join(strings.Fields(l), " ") == want {
			return true
		}
	}
	return false
}

func expectRefusal(t *testing.T, what, out string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want %q:\n%s", what, want, out)
		return
	}
	if !strings.Contains(out, want) {
		t.Errorf("%s: %q, want it to contain %q", what, out, want)
	}
}

// userKubeconfig writes a kubeconfig that reaches the apiserver with a
// bearer token.
func userKubeconfig(t *testing.T, a *apiserver, name, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: a.url, CertificateAuthority: a.caFile}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name+"@e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: name}
	cfg.CurrentContext = name + "@e2e"
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	must(t, "writing a kubeconfig", clientcmd.WriteToFile(*cfg, path))
	return path
}

// applyManifests creates every object of a shipped YAML file, edited by
// edit when given.
func applyManifests(t *testing.T, dyn dynamic.Interface, path string, edit func(*unstructured.Unstructured)) {
	t.Helper()
	raw, err := os.ReadFile(path)
	must(t, "reading "+path, err)
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if edit != nil {
			edit(&obj)
		}
		gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
		must(t, "apiVersion", err)
		gvr := gv.WithResource(strings.ToLower(obj.GetKind()) + "s")
		var res dynamic.ResourceInterface = dyn.Resource(gvr)
		if ns := obj.GetNamespace(); ns != "" {
			res = dyn.Resource(gvr).Namespace(ns)
		}
		_, err = res.Create(t.Context(), &obj, metav1.CreateOptions{})
		must(t, fmt.Sprintf("%s: creating %s %s", path, obj.GetKind(), obj.GetName()), err)
	}
}

// checkCLIThroughKubeconfig runs `sunset check` through kube-apiserver with
// a kubeconfig and directly with --server and a token: the same verdict,
// output and exit code.
func checkCLIThroughKubeconfig(t *testing.T, s *sunsetServer, caFile, kubeconfig, token string) {
	t.Helper()
	type result struct {
		out  string
		code int
	}
	run := func(args ...string) result {
		cmd := exec.Command(s.bin, append([]string{"check", "--target-version=1.37"}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{string(out), code}
	}
	// The same traffic either way; the cluster scan a kubeconfig brings is
	// TestScanAClusterAsAUserWithPartialAccess's subject.
	viaKube := run("--kubeconfig="+kubeconfig, "--scan-cluster=false")
	direct := run("--server="+s.url, "--certificate-authority="+caFile, "--token="+token)
	if viaKube != direct {
		t.Errorf("sunset check --kubeconfig: exit %d\n%s\nsunset check --server: exit %d\n%s", viaKube.code, viaKube.out, direct.code, direct.out)
	}
	if viaKube.code != 3 || !strings.Contains(viaKube.out, "storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated") {
		t.Errorf("sunset check --kubeconfig: exit %d, want 3 (APIs removed by 1.37 are called):\n%s", viaKube.code, viaKube.out)
	}
}

// frontProxyFlags are kube-apiserver's flags for a front proxy with a CA
// of its own, as an aggregated API server needs them.
func frontProxyFlags(t *testing.T) []string {
	t.Helper()
	front := newPKI(t)
	cert, key := front.issue(t, "front-proxy-client", "front-proxy-client", false)
	return []string{
		"--requestheader-client-ca-file=" + front.CAFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + cert,
		"--proxy-client-key-file=" + key,
	}
}

// serveAggregated runs Sunset as the shipped manifests have it: in its
// namespace, as its ServiceAccount with only the shipped RBAC, delegating
// authentication and authorization to kube-apiserver, and registered
// through the shipped APIService, with more flags. It returns the running
// server.
func serveAggregated(ctx context.Context, t *testing.T, a *apiserver, admin *kubernetes.Clientset, p *pki, sunsetBin, token string, port int, flags ...string) *sunsetServer {
	t.Helper()
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sunsetNamespace}}, metav1.CreateOptions{})
	must(t, "creating namespace "+sunsetNamespace, err)
	_, err = admin.CoreV1().ServiceAccounts(sunsetNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sunsetAccount}}, metav1.CreateOptions{})
	must(t, "creating the ServiceAccount", err)
	dyn, err := dynamic.NewForConfig(a.config(a.tokens["admin"], "e2e-setup/1.0"))
	must(t, "dynamic client", err)
	applyManifests(t, dyn, shippedRBAC, nil)
	tok, err := admin.CoreV1().ServiceAccounts(sunsetNamespace).CreateToken(ctx, sunsetAccount, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	must(t, "a token for Sunset", err)
	sunsetKubeconfig := userKubeconfig(t, a, "sunset", tok.Status.Token)
	cert, key := p.issueWithNames(t, "sunset", "sunset", true, []string{sunsetAccount + "." + sunsetNamespace + ".svc"})
	s := newSunsetOn(t, sunsetBin, p, token, port, cert, key, append([]string{
		"--authentication-kubeconfig=" + sunsetKubeconfig,
		"--authorization-kubeconfig=" + sunsetKubeconfig}, flags...)...)
	s.start(t)
	registerAPIService(ctx, t, admin, dyn, p, port)
	return s
}

// bindAuditorsToView lets the group auditors read through the shipped
// sunset:view. (Its aggregation into view is the work of
// kube-controller-manager, which these tests do not run.)
func bindAuditorsToView(ctx context.Context, t *testing.T, admin *kubernetes.Clientset) {
	t.Helper()
	_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-auditors-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "sunset:view"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "auditors"}},
	}, metav1.CreateOptions{})
	must(t, "binding auditors to view", err)
}

// registerAPIService serves sunset.dev/v1 through kube-apiserver with the
// shipped APIService, trusting p's CA, and waits until the aggregator
// calls it available. The aggregator reaches Sunset on loopback through an
// ExternalName Service, and verifies it as sunset.sunset.svc against
// caBundle.
func registerAPIService(ctx context.Context, t *testing.T, admin *kubernetes.Clientset, dyn dynamic.Interface, p *pki, port int) {
	t.Helper()
	_, err := admin.CoreV1().Services(sunsetNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: sunsetAccount},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{})
	must(t, "creating the ExternalName Service", err)
	caPEM, err := os.ReadFile(p.CAFile)
	must(t, "reading the CA", err)
	applyManifests(t, dyn, shippedAPIService, func(obj *unstructured.Unstructured) {
		must(t, "caBundle", unstructured.SetNestedField(obj.Object, base64.StdEncoding.EncodeToString(caPEM), "spec", "caBundle"))
		must(t, "port", unstructured.SetNestedField(obj.Object, int64(port), "spec", "service", "port"))
	})
	waitFor(t, "the APIService to be available", 2*time.Minute, func() error {
		obj, err := dyn.Resource(apiServices).Get(ctx, "v1.sunset.dev", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "Available" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", conds)
	})
}
