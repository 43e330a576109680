package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1beta1 "k8s.io/api/storage/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// The upgrade gate's shipped objects and the CRDs of the kinds it judges
// (testdata/cluster-api/README.md, testdata/ack-eks-controller/README.md).
const (
	shippedGateOverlay = "../../deploy/kubernetes/overlays/gate"
	shippedArgoPreSync = "../../deploy/pipeline/argocd-presync.yaml"
	clusterAPICRDs     = "testdata/cluster-api"
	ackEKSCRDs         = "testdata/ack-eks-controller"
	// fleetNS holds the cluster objects, as a GitOps repository's
	// application would.
	fleetNS = "fleet"
	// gateWebhook is the webhook's name in the overlay, as kube-apiserver
	// names it in a refusal.
	gateWebhook = "gate.sunset.dev"
)

var (
	capiClusters = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	kcps         = schema.GroupVersionResource{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Resource: "kubeadmcontrolplanes"}
	eksClusters  = schema.GroupVersionResource{Group: "eks.services.k8s.aws", Version: "v1alpha1", Resource: "clusters"}
)

// A real kube-apiserver with the real CRDs of Cluster API's Cluster and
// KubeadmControlPlane and of ACK's EKS Cluster calls Sunset's gate through
// the ValidatingWebhookConfiguration the overlay ships. With carol calling
// storage.k8s.io/v1beta1 VolumeAttributesClass (removed in 1.37) in
// cluster e2e, a kubectl patch to v1.37.0 of any object standing for e2e
// is refused naming carol and the API; a patch release, a cluster with no
// removed-API callers and a deprecated-only finding are allowed, the last
// two with kubectl warnings; the override annotation lets the bump through
// and is counted. The Argo CD PreSync Job's `sunset check`, run as its
// ServiceAccount with its RBAC, refuses the same bump.
func TestUpgradeGateThroughKubeAPIServer(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	token := randomToken(t)
	port := freePort(t)
	sunsetURL := fmt.Sprintf("https://127.0.0.1:%d", port)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, sunsetURL+"/audit/webhook/"+clusterName+"/"+nodeName, token), frontProxyFlags(t)...)
	ctx := ctxWithin(t, 8*time.Minute)
	admin := a.as(t, "admin", "e2e-setup/1.0")
	gateConfig := p.write(t, "sunset.yaml", []byte("gate:\n  enabled: true\n"))
	s := serveAggregated(ctx, t, a, admin, p, sunsetBin, token, port, "--config="+gateConfig)
	adminKubeconfig := userKubeconfig(t, a, "admin", a.tokens["admin"])

	cfg := a.config(a.tokens["admin"], "e2e-setup/1.0")
	dyn, err := dynamic.NewForConfig(cfg)
	must(t, "dynamic client", err)
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	must(t, "discovery client", err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	installCRDs(ctx, t, dyn, mapper, clusterAPICRDs, 3)
	installCRDs(ctx, t, dyn, mapper, ackEKSCRDs, 1)

	// The overlay's webhook and ExtensionConfig as it ships them, with the
	// CA the injectors would fill in and the port the ExternalName
	// Service (serveAggregated) reaches Sunset on.
	caPEM, err := os.ReadFile(p.CAFile)
	must(t, "reading the CA", err)
	gateObjects := 0
	for _, obj := range kustomizeBuild(t, shippedGateOverlay) {
		switch obj.GetKind() {
		case "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
			if len(hooks) != 1 {
				t.Fatalf("the overlay's webhook configuration has %d webhooks, want 1", len(hooks))
			}
			hook := hooks[0].(map[string]any)
			if hook["name"] != gateWebhook {
				t.Fatalf("the overlay's webhook is %v, want %s", hook["name"], gateWebhook)
			}
			must(t, "caBundle", unstructured.SetNestedField(hook, base64.StdEncoding.EncodeToString(caPEM), "clientConfig", "caBundle"))
			must(t, "port", unstructured.SetNestedField(hook, int64(port), "clientConfig", "service", "port"))
			must(t, "webhooks", unstructured.SetNestedSlice(obj.Object, hooks, "webhooks"))
		case "ExtensionConfig":
			// Checked against Cluster API's own schema; no Cluster API
			// controller runs here to call it.
		default:
			continue
		}
		applyObject(ctx, t, dyn, mapper, obj, "e2e-gate")
		gateObjects++
	}
	if gateObjects != 2 {
		t.Fatalf("applied %d of the overlay's gate objects, want its webhook and ExtensionConfig", gateObjects)
	}

	// The cluster objects: each stands for a Sunset cluster by its name,
	// its sunset.dev/cluster label or annotation.
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNS}}, metav1.CreateOptions{})
	must(t, "creating namespace "+fleetNS, err)
	create := func(gvr schema.GroupVersionResource, obj map[string]any) {
		t.Helper()
		_, err := dyn.Resource(gvr).Namespace(fleetNS).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		must(t, fmt.Sprintf("creating %s %v", gvr.Resource, obj["metadata"]), err)
	}
	capiCluster := func(name, version string, labels map[string]any) map[string]any {
		return map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
			"metadata": map[string]any{"name": name, "labels": labels},
			"spec":     map[string]any{"topology": map[string]any{"classRef": map[string]any{"name": "quick-start"}, "version": version}}}
	}
	create(capiClusters, capiCluster(clusterName, "v1.36.3", nil))
	create(capiClusters, capiCluster("staging", "v1.36.3", nil))
	create(capiClusters, capiCluster("e2e-canary", "v1.35.2", map[string]any{"sunset.dev/cluster": clusterName}))
	create(kcps, map[string]any{"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
		"metadata": map[string]any{"name": "e2e-control-plane", "labels": map[string]any{"sunset.dev/cluster": clusterName}},
		"spec": map[string]any{"version": "v1.36.3", "machineTemplate": map[string]any{"spec": map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "e2e-control-plane"}}}}})
	create(eksClusters, map[string]any{"apiVersion": "eks.services.k8s.aws/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": "e2e-eks", "annotations": map[string]any{"sunset.dev/cluster": clusterName}},
		"spec": map[string]any{"name": "e2e-eks", "version": "1.36", "roleARN": "arn:aws:iam::111122223333:role/eks",
			"resourcesVPCConfig": map[string]any{"subnetIDs": []any{"subnet-0a", "subnet-0b"}}}})

	// carol calls an API removed in 1.37 and one deprecated for good, in
	// cluster e2e; dave, in cluster staging, only the deprecated one.
	carol := a.as(t, "carol", carolAgent)
	bindClusterAdmin(ctx, t, admin, "carol")
	_, err = carol.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	must(t, "list componentstatuses", err)
	vacs := carol.StorageV1beta1().VolumeAttributesClasses()
	_, err = vacs.Create(ctx, &storagev1beta1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com",
		Parameters: map[string]string{"iops": "3000"}}, metav1.CreateOptions{})
	must(t, "create volumeattributesclass", err)
	_, err = vacs.Get(ctx, "gold", metav1.GetOptions{})
	must(t, "get volumeattributesclass", err)
	postStagingTraffic(t, s, p, token)
	waitFor(t, "Sunset to count carol's and dave's requests", 2*time.Minute, func() error {
		for api, cluster := range map[string]string{"volumeattributesclasses.v1beta1.storage.k8s.io": clusterName, "componentstatuses.v1": "staging"} {
			var rc struct {
				Status struct {
					RequestCount int64 `json:"requestCount"`
				} `json:"status"`
			}
			if err := getSunsetJSONErr(s, a.tokens["admin"], "/apis/sunset.dev/v1/apirequestcounts/"+api+"?cluster="+cluster, &rc); err != nil {
				return err
			}
			if rc.Status.RequestCount == 0 {
				return fmt.Errorf("%s in %s: no requests yet", api, cluster)
			}
		}
		return nil
	})

	// kube-apiserver picks the webhook up asynchronously: dry runs, which
	// a webhook with sideEffects: None sees, probe until it refuses.
	patchVersion := `{"spec":{"topology":{"version":"v1.37.0"}}}`
	waitFor(t, "kube-apiserver to call the gate", time.Minute, func() error {
		_, stderr, err := kubectlOut(t, adminKubeconfig, "-n", fleetNS, "patch", "clusters.cluster.x-k8s.io", clusterName, "--type=merge", "-p", patchVersion, "--dry-run=server")
		if err == nil {
			return errNotYet
		}
		if !strings.Contains(stderr, `admission webhook "`+gateWebhook+`" denied the request`) {
			return fmt.Errorf("%w: %s", err, stderr)
		}
		return nil
	})
	before := gateReviews(t, s, a.tokens["admin"])

	// Refused: each object that stands for e2e, in its own spelling, with
	// the verdict's sentence, carol's two requests to the removed API, and
	// the override that names the object.
	for _, tc := range []struct{ resource, kind, name, patch string }{
		{"clusters.cluster.x-k8s.io", "Cluster", clusterName, patchVersion},
		{"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "KubeadmControlPlane", "e2e-control-plane", `{"spec":{"version":"v1.37.0"}}`},
		{"clusters.eks.services.k8s.aws", "Cluster", "e2e-eks", `{"spec":{"version":"1.37"}}`},
	} {
		_, stderr, err := kubectlOut(t, adminKubeconfig, "-n", fleetNS, "patch", tc.resource, tc.name, "--type=merge", "-p", tc.patch)
		if err == nil {
			t.Errorf("kubectl patch %s %s to 1.37 was allowed; want it refused", tc.resource, tc.name)
			continue
		}
		want := `Error from server (Forbidden): admission webhook "` + gateWebhook + `" denied the request: ` +
			"sunset: the upgrade of cluster e2e from 1.36 to 1.37 is refused, first breaking at 1.37: " +
			"NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 24h, system users excluded.\n" +
			"- storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass: " +
			"2 requests in the last 24h by carol\n" +
			"To upgrade anyway, annotate " + tc.kind + " " + fleetNS + "/" + tc.name + ` with sunset.dev/upgrade-override="<reason>".`
		if got := strings.TrimSpace(stderr); got != want {
			t.Errorf("kubectl patch %s %s to 1.37:\n%s\nwant:\n%s", tc.resource, tc.name, got, want)
		}
	}
	requireVersion(ctx, t, dyn, capiClusters, clusterName, "v1.36.3", "spec", "topology", "version")

	// Allowed: a patch release, silently; a cluster whose callers use only
	// deprecated APIs, and e2e's step to 1.36, where VolumeAttributesClass
	// is deprecated but not yet removed, each with a kubectl warning per
	// API and one that says nothing is removed.
	const (
		vacWarning = "sunset: storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; " +
			"use storage.k8s.io/v1 VolumeAttributesClass: 2 requests in the last 24h by carol"
		csWarning = "sunset: v1 ComponentStatus is deprecated in v1.19+: 1 request in the last 24h by "
	)
	for _, tc := range []struct {
		name, version string
		warnings      []string
	}{
		{clusterName, "v1.36.4", nil},
		{"staging", "v1.37.0", []string{csWarning + "dave", "sunset: nothing in use is removed by 1.37; the APIs above are deprecated"}},
		{"e2e-canary", "v1.36.0", []string{vacWarning, csWarning + "carol", "sunset: nothing in use is removed by 1.36; the APIs above are deprecated"}},
	} {
		_, stderr, err := kubectlOut(t, adminKubeconfig, "-n", fleetNS, "patch", "clusters.cluster.x-k8s.io", tc.name, "--type=merge",
			"-p", `{"spec":{"topology":{"version":"`+tc.version+`"}}}`)
		if err != nil {
			t.Errorf("kubectl patch cluster %s to %s: %v\n%s", tc.name, tc.version, err, stderr)
			continue
		}
		requireVersion(ctx, t, dyn, capiClusters, tc.name, tc.version, "spec", "topology", "version")
		if got := kubectlWarnings(stderr); !slices.Equal(got, tc.warnings) {
			t.Errorf("kubectl patch cluster %s to %s: warnings\n%q\nwant\n%q", tc.name, tc.version, got, tc.warnings)
		}
	}

	// The override, with its reason, lets e2e's bump through, and is
	// counted once.
	_, stderr, err := kubectlOut(t, adminKubeconfig, "-n", fleetNS, "annotate", "clusters.cluster.x-k8s.io", clusterName,
		"sunset.dev/upgrade-override=CHG-1234: carol's client moves to storage.k8s.io/v1 with this release")
	must(t, "annotating the override: "+stderr, err)
	_, stderr, err = kubectlOut(t, adminKubeconfig, "-n", fleetNS, "patch", "clusters.cluster.x-k8s.io", clusterName, "--type=merge", "-p", patchVersion)
	must(t, "kubectl patch with the override: "+stderr, err)
	requireVersion(ctx, t, dyn, capiClusters, clusterName, "v1.37.0", "spec", "topology", "version")
	// Allowed twice: the patch release, and the annotation, which leaves
	// the version alone.
	after := gateReviews(t, s, a.tokens["admin"])
	want := map[string]float64{"refused": 3, "allowed": 2, "warned": 2, "overridden": 1}
	for decision, n := range want {
		if got := after[decision] - before[decision]; got != n {
			t.Errorf("sunset_gate_reviews_total{source=\"admission\",decision=%q} rose by %v, want %v (before %v, after %v)", decision, got, n, before, after)
		}
	}
	if after["error"] != 0 {
		t.Errorf("the gate answered %v reviews with an error", after["error"])
	}

	runArgoPreSyncCheck(ctx, t, a, dyn, mapper, sunsetBin)
}

// installCRDs creates every CRD of dir's YAML files, want of them, and
// waits until each is served.
func installCRDs(ctx context.Context, t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, dir string, want int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	must(t, "listing the CRDs", err)
	installed := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		must(t, "reading "+f, err)
		for _, obj := range decodeObjects(t, f, raw) {
			applyObject(ctx, t, dyn, mapper, obj, "e2e-crds")
			waitFor(t, "CRD "+obj.GetName()+" to be established", time.Minute, func() error { return established(ctx, dyn, obj.GetName()) })
			installed++
		}
	}
	if installed != want {
		t.Fatalf("%s: installed %d CRDs, want %d", dir, installed, want)
	}
	if r, ok := mapper.(interface{ Reset() }); ok {
		r.Reset()
	}
}

// bindClusterAdmin lets user do anything, as the traffic's users may.
func bindClusterAdmin(ctx context.Context, t *testing.T, admin *kubernetes.Clientset, user string) {
	t.Helper()
	_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-gate-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}, metav1.CreateOptions{})
	must(t, "binding "+user, err)
}

// postStagingTraffic posts, as cluster staging's apiserver, one batch of
// kube-apiserver's shape: dave lists componentstatuses (deprecated, never
// removed) and gets a pod, a read as every cluster sends.
func postStagingTraffic(t *testing.T, s *sunsetServer, p *pki, token string) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	event := func(id, uri, verb, resource, name string, deprecated bool) string {
		ann := ""
		if deprecated {
			ann = `,"annotations":{"k8s.io/deprecated":"true"}`
		}
		return `{"level":"Metadata","auditID":"` + id + `","stage":"ResponseComplete","requestURI":"` + uri + `","verb":"` + verb +
			`","user":{"username":"dave","groups":["developers","system:authenticated"]},"sourceIPs":["192.0.2.30"],"userAgent":"dave-cli/2.1",` +
			`"objectRef":{"resource":"` + resource + `","name":"` + name + `","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},` +
			`"requestReceivedTimestamp":"` + now + `","stageTimestamp":"` + now + `"` + ann + `}`
	}
	body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` +
		event("5f0c2a4e-1f4b-4a8e-9d3c-000000000001", "/api/v1/componentstatuses", "list", "componentstatuses", "", true) + "," +
		event("5f0c2a4e-1f4b-4a8e-9d3c-000000000002", "/api/v1/namespaces/default/pods/web-0", "get", "pods", "web-0", false) + `]}`
	cert, key := p.issue(t, "staging-apiserver-webhook-client", nodeName, false, "staging")
	req, err := http.NewRequest(http.MethodPost, s.url+"/audit/webhook/staging/"+nodeName, strings.NewReader(body))
	must(t, "request", err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := p.httpsClient(cert, key).Do(req)
	must(t, "posting staging's batch", err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("posting staging's batch: %s", resp.Status)
	}
}

// gateReviews reads sunset_gate_reviews_total of the admission webhook,
// by decision.
func gateReviews(t *testing.T, s *sunsetServer, bearer string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range scrape(t, s.client, s.url+"/metrics", bearer)["sunset_gate_reviews_total"].GetMetric() {
		if label(m, "source") == "admission" {
			out[label(m, "decision")] += m.GetCounter().GetValue()
		}
	}
	return out
}

// getSunsetJSONErr reads one of Sunset's JSON answers with a bearer
// token, returning what went wrong.
func getSunsetJSONErr(s *sunsetServer, bearer, path string, out any) error {
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// kubectlOut runs kubectl with a kubeconfig, returning what it wrote to
// standard output and standard error: kubectl prints admission warnings
// on standard error, as `Warning: ...`, also when the command succeeds.
func kubectlOut(t *testing.T, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(kubectlBinary(t), append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// kubectlWarnings are the admission warnings kubectl printed.
func kubectlWarnings(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if w, ok := strings.CutPrefix(line, "Warning: "); ok {
			out = append(out, w)
		}
	}
	return out
}

// requireVersion checks the version field of a stored object.
func requireVersion(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name, want string, path ...string) {
	t.Helper()
	obj, err := dyn.Resource(gvr).Namespace(fleetNS).Get(ctx, name, metav1.GetOptions{})
	must(t, "reading "+gvr.Resource+" "+name, err)
	got, _, _ := unstructured.NestedString(obj.Object, path...)
	if got != want {
		t.Errorf("%s %s: %s is %q, want %q", gvr.Resource, name, strings.Join(path, "."), got, want)
	}
}

// runArgoPreSyncCheck applies deploy/pipeline/argocd-presync.yaml as
// shipped, then runs its Job's container here as kubelet would: its
// command and arguments, with the ServiceAccount's token and CA where the
// Job's kubeconfig names them, and that kubeconfig's server replaced by
// the test's kube-apiserver. Bound to sunset:view alone, it reads Sunset
// through the APIService and refuses cluster e2e's bump to v1.37.0 (exit
// 3) naming carol.
func runArgoPreSyncCheck(ctx context.Context, t *testing.T, a *apiserver, dyn dynamic.Interface, mapper meta.RESTMapper, sunsetBin string) {
	t.Helper()
	raw, err := os.ReadFile(shippedArgoPreSync)
	must(t, "reading "+shippedArgoPreSync, err)
	var job *unstructured.Unstructured
	var kubeconfig string
	for _, obj := range decodeObjects(t, shippedArgoPreSync, raw) {
		applyObject(ctx, t, dyn, mapper, obj, "e2e-argocd")
		switch obj.GetKind() {
		case "Job":
			job = obj
		case "ConfigMap":
			kubeconfig, _, _ = unstructured.NestedString(obj.Object, "data", "kubeconfig")
		}
	}
	if job == nil || kubeconfig == "" {
		t.Fatalf("%s has no Job or no kubeconfig", shippedArgoPreSync)
	}
	podSpec, _, _ := unstructured.NestedMap(job.Object, "spec", "template", "spec")
	account := podSpec["serviceAccountName"].(string)
	containers := podSpec["containers"].([]any)
	c := containers[0].(map[string]any)
	var args []string
	for _, arg := range c["args"].([]any) {
		args = append(args, arg.(string))
	}

	admin := a.as(t, "admin", "e2e-setup/1.0")
	tok, err := admin.CoreV1().ServiceAccounts(job.GetNamespace()).CreateToken(ctx, account, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	must(t, "a token for "+account, err)
	dir := t.TempDir()
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	must(t, "the Job's kubeconfig", err)
	for _, cl := range cfg.Clusters {
		cl.Server = a.url
		cl.CertificateAuthority = a.caFile
	}
	for _, u := range cfg.AuthInfos {
		u.TokenFile = filepath.Join(dir, "token")
	}
	must(t, "token file", os.WriteFile(filepath.Join(dir, "token"), []byte(tok.Status.Token), 0o600))
	must(t, "kubeconfig", clientcmd.WriteToFile(*cfg, filepath.Join(dir, "kubeconfig")))
	for i, arg := range args {
		switch {
		case strings.HasPrefix(arg, "--kubeconfig="):
			args[i] = "--kubeconfig=" + filepath.Join(dir, "kubeconfig")
		case strings.HasPrefix(arg, "--cluster="):
			// The shipped Job names cluster prod; here it is e2e.
			args[i] = "--cluster=" + clusterName
		}
	}
	cmd := exec.CommandContext(ctx, sunsetBin, args...)
	cmd.Env = []string{"HOME=" + dir}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("the PreSync Job's sunset %s: %v, want exit 3 (removed APIs called):\n%s", strings.Join(args, " "), err, out)
	}
	want := "Warning: storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass (2 requests in 24h by 1 client: carol)\n" +
		"Warning: v1 ComponentStatus is deprecated in v1.19+ (1 request in 24h by 1 client: carol)\n" +
		"NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 24h, system users excluded.\n"
	if string(out) != want {
		t.Errorf("the PreSync Job's check printed:\n%s\nwant:\n%s", out, want)
	}
}
