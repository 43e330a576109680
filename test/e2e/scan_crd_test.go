package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// A real kube-apiserver serves two CRDs: widgets, whose v1beta1 is
// deprecated with a warning of its own, and sprockets, whose v1alpha1 is
// no longer served. `sunset scan --kubeconfig` of manifests written at
// those versions judges them by the cluster's CRDs, which the catalog
// knows nothing of: the sprocket removed, the widget deprecated with the
// CRD's warning, the v1 widget clean, each with source crd. The scan calls
// no API the apiserver marks deprecated.
func TestScanJudgesManifestsByTheClustersCRDs(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, "https://127.0.0.1:1/audit/webhook/e2e/apiserver-0", randomToken(t)))
	ctx := ctxWithin(t, 5*time.Minute)
	dyn, err := dynamic.NewForConfig(a.config(a.tokens["admin"], "e2e-setup/1.0"))
	must(t, "dynamic client", err)
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

	const warning = "crd.example.com/v1beta1 Widget is deprecated; use crd.example.com/v1 Widget"
	widgets := deprecatedCRD("crd.example.com", "Widget")
	versions, _, _ := unstructured.NestedSlice(widgets.Object, "spec", "versions")
	versions[0].(map[string]any)["deprecationWarning"] = warning
	must(t, "editing the widgets CRD", unstructured.SetNestedSlice(widgets.Object, versions, "spec", "versions"))
	_, err = dyn.Resource(crds).Create(ctx, widgets, metav1.CreateOptions{})
	must(t, "creating the widgets CRD", err)

	sprockets := deprecatedCRD("crd.example.com", "Sprocket")
	versions, _, _ = unstructured.NestedSlice(sprockets.Object, "spec", "versions")
	versions[0].(map[string]any)["name"], versions[0].(map[string]any)["served"], versions[0].(map[string]any)["deprecated"] = "v1alpha1", false, false
	must(t, "editing the sprockets CRD", unstructured.SetNestedSlice(sprockets.Object, versions, "spec", "versions"))
	_, err = dyn.Resource(crds).Create(ctx, sprockets, metav1.CreateOptions{})
	must(t, "creating the sprockets CRD", err)

	manifest := filepath.Join(t.TempDir(), "objects.yaml")
	must(t, "writing the manifests", os.WriteFile(manifest, []byte(`apiVersion: crd.example.com/v1beta1
kind: Widget
metadata: {name: old-widget, namespace: shop}
---
apiVersion: crd.example.com/v1
kind: Widget
metadata: {name: new-widget, namespace: shop}
---
apiVersion: crd.example.com/v1alpha1
kind: Sprocket
metadata: {name: gone, namespace: shop}
`), 0o600))

	out, err := exec.CommandContext(ctx, sunsetBin, "scan", "--kubeconfig", userKubeconfig(t, a, "admin", a.tokens["admin"]),
		"--target-version", "1.37", "-o", "json", manifest).Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("sunset scan: %v, want exit code 3; stdout:\n%s\nstderr:\n%s", err, out, stderrOf(err))
	}
	var res struct {
		Findings []struct {
			Severity, Rule, APIVersion, Kind, Name, Replacement, Message, Source string
		} `json:"findings"`
	}
	must(t, "decoding the scan", json.Unmarshal(out, &res))
	var got []string
	for _, f := range res.Findings {
		got = append(got, strings.Join([]string{f.Severity, f.Rule, f.APIVersion, f.Kind, f.Name, f.Replacement, f.Source, f.Message}, " | "))
	}
	want := []string{
		"removed | removed-api | crd.example.com/v1alpha1 | Sprocket | gone | crd.example.com/v1 Sprocket | crd | " +
			"crd.example.com/v1alpha1 Sprocket is not served by the cluster's CustomResourceDefinition sprockets.crd.example.com",
		"deprecated | deprecated-api | crd.example.com/v1beta1 | Widget | old-widget | crd.example.com/v1 Widget | crd | " + warning,
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The scan's own requests (admin's, without the setup's user agent)
	// read the CRDs and call nothing the apiserver marks deprecated.
	var crdLists int
	var deprecated []string
	eachCompleted(t, a.auditLog, func(ev *auditEvent) {
		if ev.User.Username != "admin" || ev.UserAgent == "e2e-setup/1.0" {
			return
		}
		if ev.Verb == "list" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "customresourcedefinitions" {
			crdLists++
		}
		if _, ok := ev.Annotations["k8s.io/deprecated"]; ok {
			deprecated = append(deprecated, ev.Verb+" "+ev.RequestURI)
		}
	})
	if crdLists == 0 || len(deprecated) > 0 {
		t.Fatalf("audit log: the scan listed CRDs %d times (want at least once), deprecated calls: %v", crdLists, deprecated)
	}
}
