package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// fixTree is the tree package fix/manifest's goldens are made from.
const fixTree = "../../fix/manifest/testdata/tree"

// `sunset scan --fix` moves the fixtures' objects off APIs that
// kube-apiserver 1.36 no longer serves, and a real kube-apiserver v1.36
// accepts every object of every manifest it rewrote, by a server-side
// dry-run create that validates each against its schema, and so every
// object the fixed kustomization builds, its patches and patch target
// moved with its objects; the originals' APIs it does not serve at all. A
// second --fix moves nothing.
func TestScanFixOutputIsAcceptedByKubeAPIServer(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, "https://127.0.0.1:1/audit/webhook/e2e/apiserver-0", randomToken(t)))
	ctx := ctxWithin(t, 5*time.Minute)
	cfg := a.config(a.tokens["admin"], "e2e-scan-fix/1.0")
	dyn, err := dynamic.NewForConfig(cfg)
	must(t, "dynamic client", err)
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	must(t, "discovery client", err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))

	dir := filepath.Join(t.TempDir(), "tree")
	copyDir(t, fixTree, dir)
	out, err := exec.CommandContext(ctx, sunsetBin, "scan", "--target-version", "1.37", "--fix", dir).Output()
	if code := exitCode(err); code != 1 {
		t.Fatalf("sunset scan --fix: exit code %d (%v), want 1 for the files it leaves; stdout:\n%s\nstderr:\n%s", code, err, out, stderrOf(err))
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if last := lines[len(lines)-1]; last != "13 changes written to 11 files. 5 not rewritten, listed above." {
		t.Fatalf("sunset scan --fix ends with %q; stdout:\n%s", last, out)
	}
	var rewritten []string
	for _, l := range lines {
		if f, ok := strings.CutPrefix(l, "rewrote "); ok {
			rel, err := filepath.Rel(dir, f)
			must(t, "path", err)
			rewritten = append(rewritten, filepath.ToSlash(rel))
		}
	}
	wantRewritten := []string{
		"chart/templates/cronjob.yaml", "kustomize/cronjob-patch.yaml", "kustomize/cronjob.yaml", "kustomize/ingress-patch.yaml",
		"kustomize/ingress.yaml", "kustomize/kustomization.yaml", "kustomize/rbac.yaml", "manifests/commented.yaml", "manifests/crlf.yaml", "manifests/cronjob.json", "manifests/list.yaml",
	}
	if !slices.Equal(rewritten, wantRewritten) {
		t.Fatalf("rewrote %v, want %v", rewritten, wantRewritten)
	}

	// A chart template is not YAML until rendered, a kustomize patch is
	// part of an object and a kustomization no object: every other
	// rewritten file is whole objects.
	accepted := 0
	var movedFrom []string
	for _, rel := range wantRewritten {
		if strings.HasPrefix(rel, "chart/") || strings.HasSuffix(rel, "-patch.yaml") || strings.HasSuffix(rel, "/kustomization.yaml") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, rel))
		must(t, "reading "+rel, err)
		orig, err := os.ReadFile(filepath.Join(fixTree, rel))
		must(t, "reading the original "+rel, err)
		for _, o := range listItems(decodeObjects(t, rel, orig)) {
			movedFrom = append(movedFrom, o.GetAPIVersion()+" "+o.GetKind())
		}
		for _, obj := range listItems(decodeObjects(t, rel, raw)) {
			dryRunCreate(ctx, t, dyn, mapper, rel, obj)
			accepted++
		}
	}
	if accepted != 11 {
		t.Fatalf("kube-apiserver accepted %d objects, want the 11 of the 7 rewritten manifests", accepted)
	}

	// The fixed kustomization builds, its patches and its patch target
	// applied to the moved objects, and what it builds is accepted too.
	built := map[string]*unstructured.Unstructured{}
	for _, obj := range kustomizeBuild(t, filepath.Join(dir, "kustomize")) {
		dryRunCreate(ctx, t, dyn, mapper, "kustomize build", obj)
		built[obj.GetAPIVersion()+" "+obj.GetKind()] = obj
	}
	if len(built) != 3 {
		t.Fatalf("kustomize build made %d objects, want the ClusterRole, CronJob and Ingress: %v", len(built), built)
	}
	cron, ingress := built["batch/v1 CronJob"], built["networking.k8s.io/v1 Ingress"]
	if cron == nil || ingress == nil || built["rbac.authorization.k8s.io/v1 ClusterRole"] == nil {
		t.Fatalf("kustomize build made %v, want them at their replacement APIs", slices.Collect(maps.Keys(built)))
	}
	schedule, _, _ := unstructured.NestedString(cron.Object, "spec", "schedule")
	suspend, _, _ := unstructured.NestedBool(cron.Object, "spec", "suspend")
	if schedule != "0 4 * * *" || !suspend || ingress.GetAnnotations()["example.com/owner"] != "ops" {
		t.Fatalf("the patches did not apply to the moved objects: schedule %q, suspend %v, annotations %v", schedule, suspend, ingress.GetAnnotations())
	}

	// The APIs the objects were written at are not served: without the
	// fix, none of the moved objects could be applied.
	slices.Sort(movedFrom)
	movedFrom = slices.Compact(movedFrom)
	var served []string
	for _, av := range movedFrom {
		apiVersion, kind, _ := strings.Cut(av, " ")
		gv, err := schema.ParseGroupVersion(apiVersion)
		must(t, "apiVersion", err)
		if _, err := mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version); err == nil {
			served = append(served, av)
		} else if !meta.IsNoMatchError(err) {
			t.Fatalf("looking up %s: %v", av, err)
		}
	}
	if !slices.Equal(served, []string{"v1 ConfigMap"}) {
		t.Fatalf("of the original APIs %v, kube-apiserver serves %v; want only v1 ConfigMap, which moves nowhere", movedFrom, served)
	}

	out, err = exec.CommandContext(ctx, sunsetBin, "scan", "--target-version", "1.37", "--fix", dir).Output()
	if code := exitCode(err); code != 1 {
		t.Fatalf("a second sunset scan --fix: exit code %d (%v); stdout:\n%s\nstderr:\n%s", code, err, out, stderrOf(err))
	}
	if !strings.HasSuffix(string(out), "\nNothing to rewrite in 17 files read. 5 not rewritten, listed above.\n") {
		t.Fatalf("a second sunset scan --fix rewrote something:\n%s", out)
	}
}

// listItems are the objects of a List one by one, and other objects as they
// are.
func listItems(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if !o.IsList() {
			out = append(out, o)
			continue
		}
		list, err := o.ToList()
		if err != nil {
			out = append(out, o)
			continue
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

// dryRunCreate creates obj with dryRun=All, in namespace default when it
// is namespaced and names none, as kubectl apply would; kube-apiserver
// runs defaulting, validation and admission, and stores nothing.
func dryRunCreate(ctx context.Context, t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, file string, obj *unstructured.Unstructured) {
	t.Helper()
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	must(t, fmt.Sprintf("%s: kube-apiserver serving %s", file, gvk), err)
	res := dyn.Resource(mapping.Resource).Namespace("")
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		res = dyn.Resource(mapping.Resource).Namespace(ns)
	}
	_, err = res.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	must(t, fmt.Sprintf("%s: a server-side dry-run create of %s %s", file, gvk.Kind, obj.GetName()), err)
}

// copyDir copies the regular files under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	must(t, "copying "+src, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return errors.New(p + " is not a regular file")
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
}
