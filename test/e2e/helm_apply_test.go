package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	shippedChart          = "../../deploy/helm/sunset"
	shippedKustomizations = "../../deploy/kubernetes"
	// The Prometheus Operator's CRDs (testdata/prometheus-operator/README.md).
	operatorCRDs = "testdata/prometheus-operator"
	installDoc   = "../../docs/install.md"
	gateDoc      = "../../docs/gate.md"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// The Helm chart, with every example's values, and every kustomization
// under deploy/kubernetes apply server-side, for real, into kube-apiserver,
// which checks every object against its own schemas and the Prometheus
// Operator's and Cluster API's CRDs. Then Sunset runs as the
// ServiceAccount the chart created, with only the chart's RBAC: it makes
// its certificate, publishes the CA in Secret sunset-ca, and
// docs/install.md's one-liner puts that CA into the APIService, through
// which kube-apiserver's aggregator then verifies Sunset and serves
// kubectl get apirequestcounts.sunset.dev.
func TestChartAndKustomizationsApplyServerSide(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	kubectl := kubectlBinary(t)
	p := newPKI(t)
	// Nothing listens for the audit webhook here: batches fail and are
	// dropped, which kube-apiserver's batch mode shrugs off.
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, "https://127.0.0.1:"+strconv.Itoa(freePort(t))+"/audit/webhook/"+clusterName+"/"+nodeName, randomToken(t)),
		frontProxyFlags(t)...)
	ctx := ctxWithin(t, 8*time.Minute)
	cfg := a.config(a.tokens["admin"], "e2e-apply/1.0")
	dyn, err := dynamic.NewForConfig(cfg)
	must(t, "dynamic client", err)
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	must(t, "discovery client", err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	admin := a.as(t, "admin", "e2e-apply/1.0")

	// The operator's CRDs first, as a cluster with the operator has them.
	crdFiles, err := filepath.Glob(filepath.Join(operatorCRDs, "*.yaml"))
	must(t, "listing the CRDs", err)
	if len(crdFiles) != 2 {
		t.Fatalf("want the ServiceMonitor and PrometheusRule CRDs in %s, found %v", operatorCRDs, crdFiles)
	}
	for _, f := range crdFiles {
		raw, err := os.ReadFile(f)
		must(t, "reading "+f, err)
		for _, obj := range decodeObjects(t, f, raw) {
			applyObject(ctx, t, dyn, mapper, obj, "e2e-crds")
			waitFor(t, "CRD "+obj.GetName()+" to be established", time.Minute, func() error { return established(ctx, dyn, obj.GetName()) })
		}
	}
	mapper.Reset()
	// Cluster API's ExtensionConfig, which the gate's overlay and chart
	// example ship (their webhook is a built-in kind).
	extensionConfigCRD := filepath.Join(clusterAPICRDs, "runtime.cluster.x-k8s.io_extensionconfigs.yaml")
	raw, err := os.ReadFile(extensionConfigCRD)
	must(t, "reading "+extensionConfigCRD, err)
	for _, obj := range decodeObjects(t, extensionConfigCRD, raw) {
		applyObject(ctx, t, dyn, mapper, obj, "e2e-crds")
		waitFor(t, "CRD "+obj.GetName()+" to be established", time.Minute, func() error { return established(ctx, dyn, obj.GetName()) })
	}
	mapper.Reset()

	// The chart installs into an existing namespace, as with
	// `helm install --create-namespace`.
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sunsetNamespace}}, metav1.CreateOptions{})
	must(t, "creating namespace "+sunsetNamespace, err)

	// Every kustomization, then the chart with every example, the
	// defaults last: what Sunset runs with below.
	var kustomizations []string
	must(t, "finding kustomizations", filepath.WalkDir(shippedKustomizations, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "kustomization.yaml" {
			kustomizations = append(kustomizations, filepath.Dir(path))
		}
		return err
	}))
	if len(kustomizations) < 3 {
		t.Fatalf("kustomizations under %s: %v", shippedKustomizations, kustomizations)
	}
	// Each source is a fresh install of the StatefulSet: its volume claim
	// templates and pod management policy cannot change in place, and
	// differ between them (the managed-by label of the claims, a fleet's
	// Parallel).
	freshStatefulSet := func() {
		// Background: Orphan would wait for a garbage collector, which
		// this control plane does not run. There are no pods to keep.
		background := metav1.DeletePropagationBackground
		err := admin.AppsV1().StatefulSets(sunsetNamespace).Delete(ctx, sunsetAccount, metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting the StatefulSet: %v", err)
		}
	}
	applied := map[string]int{}
	for _, dir := range kustomizations {
		freshStatefulSet()
		for _, obj := range kustomizeBuild(t, dir) {
			applyObject(ctx, t, dyn, mapper, obj, "e2e-kustomize")
			applied[obj.GetKind()]++
		}
	}
	examples, err := filepath.Glob(filepath.Join(shippedChart, "examples", "*.yaml"))
	must(t, "listing the chart's examples", err)
	slices.SortFunc(examples, func(x, y string) int {
		// default.yaml last.
		return strings.Compare(strings.Replace(x, "default.yaml", "~", 1), strings.Replace(y, "default.yaml", "~", 1))
	})
	for _, example := range examples {
		freshStatefulSet()
		for _, obj := range helmTemplate(ctx, t, example) {
			applyObject(ctx, t, dyn, mapper, obj, "e2e-helm")
			applied[obj.GetKind()]++
		}
	}
	for _, kind := range []string{"APIService", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "NetworkPolicy", "PrometheusRule",
		"Role", "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor", "StatefulSet", "Namespace",
		"ValidatingWebhookConfiguration", "ExtensionConfig"} {
		if applied[kind] == 0 {
			t.Errorf("no %s was applied; applied %v", kind, applied)
		}
	}
	// The cluster scan's grants, as kube-apiserver decides them.
	requireScanLeastPrivilege(ctx, t, admin)

	// Sunset as the chart's ServiceAccount, with the chart's RBAC alone.
	tok, err := admin.CoreV1().ServiceAccounts(sunsetNamespace).CreateToken(ctx, sunsetAccount, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	must(t, "a token for Sunset's ServiceAccount", err)
	sunsetKubeconfig := userKubeconfig(t, a, "sunset", tok.Status.Token)
	port := freePort(t)
	dataDir := t.TempDir()
	certDir := filepath.Join(dataDir, "certs")
	proc := start(t, "sunset", sunsetBin, "serve",
		"--data-dir="+dataDir,
		"--listen=127.0.0.1:"+strconv.Itoa(port),
		"--cert-dir="+certDir,
		"--cert-hosts="+sunsetAccount+"."+sunsetNamespace+".svc",
		"--publish-ca-secret="+sunsetNamespace+"/sunset-ca",
		"--authentication-kubeconfig="+sunsetKubeconfig,
		"--authorization-kubeconfig="+sunsetKubeconfig,
		"--webhook-token-file="+p.write(t, "webhook-token", []byte(randomToken(t)+"\n")),
		"--log-format=json",
	)
	var caPEM []byte
	waitFor(t, "Sunset to make its CA", time.Minute, func() error {
		if proc.exited() {
			t.Fatalf("sunset exited (%v):\n%s", proc.err, tail(proc.log, 40))
		}
		caPEM, err = os.ReadFile(filepath.Join(certDir, "ca.crt"))
		return err
	})
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s/ca.crt holds no certificate", certDir)
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	waitHTTP(t, proc, &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
		url+"/-/ready", "", time.Minute)
	waitFor(t, "Sunset to publish its CA in Secret sunset-ca", time.Minute, func() error {
		s, err := admin.CoreV1().Secrets(sunsetNamespace).Get(ctx, "sunset-ca", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !bytes.Equal(s.Data["ca.crt"], caPEM) {
			return fmt.Errorf("ca.crt is %q, want the cert dir's", s.Data["ca.crt"])
		}
		if s.Annotations["cert-manager.io/allow-direct-injection"] != "true" {
			return fmt.Errorf("annotations %v: cert-manager's injector would refuse it", s.Annotations)
		}
		return nil
	})

	// The aggregator reaches Sunset on loopback, through an ExternalName
	// Service in place of the chart's, at Sunset's port.
	must(t, "deleting the chart's Service", admin.CoreV1().Services(sunsetNamespace).Delete(ctx, sunsetAccount, metav1.DeleteOptions{}))
	_, err = admin.CoreV1().Services(sunsetNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: sunsetAccount},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{})
	must(t, "creating the ExternalName Service", err)
	_, err = dyn.Resource(apiServices).Patch(ctx, "v1.sunset.dev", types.MergePatchType,
		[]byte(`{"spec":{"service":{"port":`+strconv.Itoa(port)+`}}}`), metav1.PatchOptions{})
	must(t, "pointing the APIService at Sunset's port", err)

	// docs/install.md's one-liner, as written, fills caBundle.
	oneLiner := caBundleOneLiner(t)
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", oneLiner)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+userKubeconfig(t, a, "admin", a.tokens["admin"]), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	must(t, fmt.Sprintf("running %q: %s", oneLiner, out), err)
	svc, err := dyn.Resource(apiServices).Get(ctx, "v1.sunset.dev", metav1.GetOptions{})
	must(t, "reading the APIService", err)
	bundle, _, _ := unstructured.NestedString(svc.Object, "spec", "caBundle")
	if bundle != base64.StdEncoding.EncodeToString(caPEM) {
		t.Fatalf("caBundle after the one-liner: %q, want Sunset's CA", bundle)
	}
	// docs/gate.md's command, as written, fills the gate webhook's
	// caBundle (the gate overlay and example applied it above).
	gateCmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", gateCABundleCommand(t))
	gateCmd.Env = cmd.Env
	out, err = gateCmd.CombinedOutput()
	must(t, fmt.Sprintf("running docs/gate.md's caBundle command: %s", out), err)
	vwc, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "sunset-gate", metav1.GetOptions{})
	must(t, "reading the gate's webhook configuration", err)
	if len(vwc.Webhooks) != 1 || !bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, caPEM) {
		t.Fatalf("the gate's webhook after docs/gate.md's command: %+v, want Sunset's CA as its one webhook's caBundle", vwc.Webhooks)
	}
	waitFor(t, "the APIService to be available", 2*time.Minute, func() error {
		obj, err := dyn.Resource(apiServices).Get(ctx, "v1.sunset.dev", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Available" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", conds)
	})
	get := exec.CommandContext(ctx, kubectl, "--kubeconfig="+userKubeconfig(t, a, "admin", a.tokens["admin"]), "get", "apirequestcounts.sunset.dev", "-o", "name")
	out, err = get.CombinedOutput()
	must(t, fmt.Sprintf("kubectl get apirequestcounts.sunset.dev through the aggregator: %s", out), err)
	if !strings.Contains(tail(proc.log, 200), `"message":"published the CA"`) {
		t.Errorf("Sunset did not log that it published the CA:\n%s", tail(proc.log, 40))
	}
}

// caBundleOneLiner is docs/install.md's command that copies the published
// CA into the APIService: its kubectl patch line and the line it
// continues on.
func caBundleOneLiner(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(installDoc)
	must(t, "reading "+installDoc, err)
	m := regexp.MustCompile(`(?m)^kubectl patch apiservice v1\.sunset\.dev [^\n]*\\\n[^\n]+$`).Find(raw)
	if m == nil {
		t.Fatalf("%s has no `kubectl patch apiservice v1.sunset.dev ... \\` command continued on a second line", installDoc)
	}
	return string(m)
}

// gateCABundleCommand is docs/gate.md's command that copies the published
// CA into the gate's webhook: its kubectl patch line and the line it
// continues on.
func gateCABundleCommand(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(gateDoc)
	must(t, "reading "+gateDoc, err)
	m := regexp.MustCompile(`(?m)^kubectl patch validatingwebhookconfiguration sunset-gate [^\n]*\\\n[^\n]+$`).Find(raw)
	if m == nil {
		t.Fatalf("%s has no `kubectl patch validatingwebhookconfiguration sunset-gate ... \\` command continued on a second line", gateDoc)
	}
	return string(m)
}

// established reports whether a CRD is established and served.
func established(ctx context.Context, dyn dynamic.Interface, name string) error {
	obj, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
			return nil
		}
	}
	return fmt.Errorf("conditions %v", conds)
}

// applyObject applies obj server-side as manager, taking over fields
// another manager applied before: kube-apiserver validates it whole,
// against the built-in types' schemas and the CRDs'.
func applyObject(ctx context.Context, t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, manager string) {
	t.Helper()
	gvk := obj.GroupVersionKind()
	var mapping *meta.RESTMapping
	// A CRD just established reaches discovery a moment later.
	waitFor(t, "kube-apiserver to serve "+gvk.String(), time.Minute, func() error {
		var err error
		if mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if r, ok := mapper.(interface{ Reset() }); ok {
				r.Reset()
			}
		}
		return err
	})
	var res dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			t.Fatalf("%s %s is namespaced but names no namespace: kubectl apply would put it in the current one", gvk.Kind, obj.GetName())
		}
		res = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	_, err := res.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: manager, Force: true})
	must(t, fmt.Sprintf("applying %s %s/%s server-side", gvk.Kind, obj.GetNamespace(), obj.GetName()), err)
}

// kustomizeBuild renders a kustomization as `kubectl kustomize` does.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	abs, err := filepath.Abs(dir)
	must(t, "path", err)
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	must(t, "kustomize build "+dir, err)
	out, err := m.AsYaml()
	must(t, "kustomize build "+dir, err)
	return decodeObjects(t, dir, out)
}

// helmTemplate renders the shipped chart with a values file, as
// `helm install --dry-run=client` does, for release sunset in namespace
// sunset.
func helmTemplate(ctx context.Context, t *testing.T, valuesFile string) []*unstructured.Unstructured {
	t.Helper()
	ch, err := loader.Load(shippedChart)
	must(t, "loading the chart", err)
	vals, err := (&values.Options{ValueFiles: []string{valuesFile}}).MergeValues(getter.Providers{})
	must(t, "reading "+valuesFile, err)
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.DiscardHandler)
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName, install.Namespace = "sunset", sunsetNamespace
	install.KubeVersion, err = chartcommon.ParseKubeVersion("v1.36.0")
	must(t, "kube version", err)
	rel, err := install.RunWithContext(ctx, ch, vals)
	must(t, "rendering the chart with "+valuesFile, err)
	r, ok := rel.(*releasev1.Release)
	if !ok {
		t.Fatalf("a release of type %T", rel)
	}
	return decodeObjects(t, valuesFile, []byte(r.Manifest))
}

// decodeObjects reads a stream of YAML documents.
func decodeObjects(t *testing.T, what string, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", what, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, &obj)
		}
	}
}
