package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

const (
	fixGroup   = "fix.example.com"
	fixCRDName = "doohickeys." + fixGroup
	// fixObjects are spread over two namespaces and listed 10 a page.
	fixObjects = 30
	fixer      = "carol"
)

var doohickeys = map[string]schema.GroupVersionResource{
	"v1beta1": {Group: fixGroup, Version: "v1beta1", Resource: "doohickeys"},
	"v1":      {Group: fixGroup, Version: "v1", Resource: "doohickeys"},
}

// A CRD stored its objects at v1beta1, then moved its storage to v1.
// `sunset fix crd` as a user without RBAC is refused with what to grant;
// with RBAC, killed after its first page, it leaves storedVersions as it
// was with a third of the objects moved (as etcd itself shows); a dry run
// writes nothing; with a policy refusing one object's update, that object
// is named, the rest move and storedVersions stays; run again without the
// policy, it moves every object to v1 in etcd, trims
// storedVersions to [v1], every object reads back unchanged, and the
// apiserver accepts dropping v1beta1 from the CRD. Sunset's user made no
// request the apiserver's audit log marks deprecated.
func TestFixCRDStoredVersions(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	db := startEtcd(t, etcdBin, p)
	a := startAPIServer(t, apiserverBin, db, p, webhookKubeconfig(t, p, "https://127.0.0.1:1/audit/webhook/e2e/apiserver-0", randomToken(t)))
	ctx := ctxWithin(t, 5*time.Minute)
	dyn, err := dynamic.NewForConfig(a.config(a.tokens["admin"], "e2e-setup/1.0"))
	must(t, "dynamic client", err)
	stored := etcdReader{db: db, client: p.httpsClient(db.certFile, db.keyFile)}

	want := createAtV1beta1ThenStoreAtV1(ctx, t, dyn, stored)
	if got := stored.versions(t); !equalJSON(got, map[string]int{fixGroup + "/v1beta1": fixObjects}) {
		t.Fatalf("etcd before the fix: %v, want all %d at v1beta1", got, fixObjects)
	}
	kubeconfig := userKubeconfig(t, a, fixer, a.tokens[fixer])

	// Without RBAC: refused, with what to grant.
	out, err := exec.CommandContext(ctx, sunsetBin, "fix", "crd", fixCRDName, "--kubeconfig", kubeconfig).Output()
	wantRefusal := `Grant get on customresourcedefinitions.apiextensions.k8s.io, e.g. a ClusterRole rule {apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["get"]}`
	if code := exitCode(err); code != 1 || !strings.Contains(stderrOf(err), wantRefusal) || len(out) != 0 {
		t.Fatalf("fix crd without RBAC: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and %q", code, out, stderrOf(err), wantRefusal)
	}
	grantFixCRD(ctx, t, a)

	// Killed after its first page.
	held := exec.CommandContext(ctx, sunsetBin, "fix", "crd", fixCRDName, "--kubeconfig", kubeconfig, "--chunk-size", "10")
	held.Env = append(os.Environ(), "SUNSET_TEST_HOLD_FIX_CRD=1")
	stdout, err := held.StdoutPipe()
	must(t, "piping fix crd's output", err)
	var heldErr bytes.Buffer
	held.Stderr = &heldErr
	must(t, "starting fix crd", held.Start())
	first, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || first != fixCRDName+": 10 objects rewritten at v1\n" {
		t.Fatalf("fix crd's first line: %q (%v), want its first page's progress; stderr:\n%s", first, err, heldErr.String())
	}
	must(t, "killing fix crd", held.Process.Signal(syscall.SIGKILL))
	var exit *exec.ExitError
	if err := held.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("fix crd held after its first page: %v, want killed by SIGKILL", err)
	}
	halfway := map[string]int{fixGroup + "/v1": 10, fixGroup + "/v1beta1": fixObjects - 10}
	if got := stored.versions(t); !equalJSON(got, halfway) {
		t.Fatalf("etcd after the fix was killed: %v, want %v", got, halfway)
	}
	requireStoredVersions(ctx, t, dyn, "v1beta1", "v1")

	// A dry run says what it would do and writes nothing.
	out, err = exec.CommandContext(ctx, sunsetBin, "fix", "crd", "--all", "--dry-run", "--kubeconfig", kubeconfig).Output()
	must(t, "fix crd --all --dry-run: "+stderrOf(err), err)
	wantDry := fixCRDName + ": 30 objects to rewrite at v1\n" +
		fixCRDName + ": would rewrite 30 objects at v1, then set status.storedVersions [v1beta1 v1] -> [v1] (dry run: nothing written)\n"
	if string(out) != wantDry {
		t.Fatalf("fix crd --dry-run printed:\n%s\nwant:\n%s", out, wantDry)
	}
	if got := stored.versions(t); !equalJSON(got, halfway) {
		t.Fatalf("etcd after the dry run: %v, want %v", got, halfway)
	}
	requireStoredVersions(ctx, t, dyn, "v1beta1", "v1")

	// An object a policy keeps from being written: named, and
	// storedVersions left alone.
	denyRewriteOf(ctx, t, a, "kube-public", "doohickey-07")
	out, err = exec.CommandContext(ctx, sunsetBin, "fix", "crd", fixCRDName, "--kubeconfig", kubeconfig, "--chunk-size", "10").Output()
	wantPartial := fixCRDName + ": 10 objects rewritten at v1\n" +
		fixCRDName + ": 19 objects rewritten at v1, 1 not rewritten\n" +
		fixCRDName + ": 29 objects rewritten at v1, 1 not rewritten\n"
	wantErr := "Error: " + fixCRDName + ": not rewritten: kube-public/doohickey-07: doohickeys.fix.example.com \"doohickey-07\" is forbidden: " +
		"ValidatingAdmissionPolicy 'e2e-keep-doohickey' with binding 'e2e-keep-doohickey' denied request: kept as it is\n" +
		"Error: CustomResourceDefinition " + fixCRDName + ": 1 of 30 objects were not rewritten at v1, so status.storedVersions stays [v1beta1 v1]: not every object was rewritten\n" +
		"Fix what kept those objects from being written (an admission webhook, a validation rule, a finalizer), then run `sunset fix crd " + fixCRDName + "` again: it rewrites only what is needed.\n" +
		"Error: 1 of 1 CustomResourceDefinitions were not fixed\n"
	if code := exitCode(err); code != 1 || string(out) != wantPartial || stderrOf(err) != wantErr {
		t.Fatalf("fix crd with an object it may not write: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 1, stdout:\n%s\nstderr:\n%s", code, out, stderrOf(err), wantPartial, wantErr)
	}
	if got, want := stored.versions(t), map[string]int{fixGroup + "/v1": fixObjects - 1, fixGroup + "/v1beta1": 1}; !equalJSON(got, want) {
		t.Fatalf("etcd after a partial fix: %v, want %v", got, want)
	}
	requireStoredVersions(ctx, t, dyn, "v1beta1", "v1")
	allowRewrites(ctx, t, a, "kube-public", "doohickey-07")

	// Run again: the job is finished.
	out, err = exec.CommandContext(ctx, sunsetBin, "fix", "crd", fixCRDName, "--kubeconfig", kubeconfig, "--chunk-size", "10").Output()
	must(t, "fix crd again: "+stderrOf(err), err)
	wantOut := fixCRDName + ": 10 objects rewritten at v1\n" +
		fixCRDName + ": 20 objects rewritten at v1\n" +
		fixCRDName + ": 30 objects rewritten at v1\n" +
		fixCRDName + ": 30 objects rewritten at v1; status.storedVersions [v1beta1 v1] -> [v1]\n"
	if string(out) != wantOut {
		t.Fatalf("fix crd printed:\n%s\nwant:\n%s", out, wantOut)
	}
	if got := stored.versions(t); !equalJSON(got, map[string]int{fixGroup + "/v1": fixObjects}) {
		t.Fatalf("etcd after the fix: %v, want all %d at v1", got, fixObjects)
	}
	requireStoredVersions(ctx, t, dyn, "v1")
	requireObjectsUnchanged(ctx, t, dyn, want)

	// Nothing left to do: a third run says so.
	out, err = exec.CommandContext(ctx, sunsetBin, "fix", "crd", "--all", "--kubeconfig", kubeconfig).Output()
	must(t, "fix crd --all after the fix: "+stderrOf(err), err)
	if want := "no CustomResourceDefinition lists a version other than its storage version in status.storedVersions\n"; string(out) != want {
		t.Fatalf("fix crd --all after the fix printed %q, want %q", out, want)
	}

	dropV1beta1(ctx, t, dyn)
	checkFixerCalledNoDeprecatedAPI(t, a.auditLog)
}

// requireObjectsUnchanged reads every object at v1: each has the spec it
// was created with at v1beta1.
func requireObjectsUnchanged(ctx context.Context, t *testing.T, dyn dynamic.Interface, want map[string]any) {
	t.Helper()
	for key, spec := range want {
		ns, name, _ := strings.Cut(key, "/")
		got, err := dyn.Resource(doohickeys["v1"]).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		must(t, "reading "+key+" at v1", err)
		if !equalJSON(got.Object["spec"], spec) {
			t.Errorf("%s at v1: spec %v, want %v as created", key, got.Object["spec"], spec)
		}
	}
}

// dropV1beta1 removes v1beta1 from the CRD's versions, which the apiserver
// accepts only once storedVersions no longer lists it.
func dropV1beta1(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := dyn.Resource(crdResource).Get(ctx, fixCRDName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		if err := unstructured.SetNestedSlice(crd.Object, versions[1:], "spec", "versions"); err != nil {
			return err
		}
		_, err = dyn.Resource(crdResource).Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	must(t, "removing v1beta1 from the CRD", err)
}

// createAtV1beta1ThenStoreAtV1 creates the CRD storing at v1beta1 and
// fixObjects objects, then moves its storage to v1, and returns each
// object's spec by namespace/name.
func createAtV1beta1ThenStoreAtV1(ctx context.Context, t *testing.T, dyn dynamic.Interface, stored etcdReader) map[string]any {
	t.Helper()
	crd := deprecatedCRD(fixGroup, "Doohickey")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	versions[0].(map[string]any)["storage"], versions[0].(map[string]any)["deprecated"] = true, false
	versions[1].(map[string]any)["storage"] = false
	must(t, "editing the CRD", unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"))
	_, err := dyn.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{})
	must(t, "creating the doohickeys CRD", err)
	waitFor(t, "CRD "+fixCRDName+" to be established", time.Minute, func() error { return established(ctx, dyn, fixCRDName) })

	want := map[string]any{}
	for i := range fixObjects {
		ns := []string{"default", "kube-public"}[i%2]
		name := fmt.Sprintf("doohickey-%02d", i)
		spec := map[string]any{"size": int64(i), "colour": "red", "parts": []any{"a", fmt.Sprint(i)}}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": fixGroup + "/v1beta1", "kind": "Doohickey",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
		waitFor(t, "creating "+name, time.Minute, func() error {
			_, err := dyn.Resource(doohickeys["v1beta1"]).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
			return err
		})
		want[ns+"/"+name] = spec
	}

	storeAtSecondVersion(ctx, t, dyn, fixCRDName, "doohickeys")
	requireStoredVersions(ctx, t, dyn, "v1beta1", "v1")
	// The apiserver's handler for the CRD takes up the new storage
	// version a moment later: until a new object is stored at v1, a
	// rewrite could still store v1beta1.
	probes := 0
	waitFor(t, "new doohickeys to be stored at v1", time.Minute, func() error {
		probes++
		name := fmt.Sprintf("probe-%d", probes)
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": fixGroup + "/v1", "kind": "Doohickey",
			"metadata": map[string]any{"name": name, "namespace": "kube-system"}}}
		if _, err := dyn.Resource(doohickeys["v1"]).Namespace("kube-system").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
		v := stored.version(t, "kube-system/"+name)
		if err := dyn.Resource(doohickeys["v1"]).Namespace("kube-system").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		if v != fixGroup+"/v1" {
			return fmt.Errorf("%s stored at %s", name, v)
		}
		return nil
	})
	return want
}

func requireStoredVersions(ctx context.Context, t *testing.T, dyn dynamic.Interface, want ...string) {
	t.Helper()
	crd, err := dyn.Resource(crdResource).Get(ctx, fixCRDName, metav1.GetOptions{})
	must(t, "reading the doohickeys CRD", err)
	got, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	if !slices.Equal(got, want) {
		t.Fatalf("storedVersions = %v, want %v", got, want)
	}
}

// denyRewriteOf makes a ValidatingAdmissionPolicy refuse the fixer's
// updates of one doohickey, and waits until the apiserver enforces it.
func denyRewriteOf(ctx context.Context, t *testing.T, a *apiserver, namespace, name string) {
	t.Helper()
	admin := a.as(t, "admin", "e2e-setup/1.0")
	_, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-keep-doohickey"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{fixGroup}, APIVersions: []string{"*"}, Resources: []string{"doohickeys"}}},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "fixer", Expression: fmt.Sprintf("request.userInfo.username == %q", fixer)}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!(object.metadata.namespace == %q && object.metadata.name == %q)", namespace, name),
				Message:    "kept as it is", Reason: ptr(metav1.StatusReasonForbidden)}},
		},
	}, metav1.CreateOptions{})
	must(t, "creating the ValidatingAdmissionPolicy", err)
	_, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-keep-doohickey"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "e2e-keep-doohickey",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}, metav1.CreateOptions{})
	must(t, "binding the ValidatingAdmissionPolicy", err)
	waitFor(t, "the policy to refuse the fixer", time.Minute, func() error {
		if err := fixerDryRunUpdate(ctx, a, namespace, name); err == nil {
			return errors.New("the fixer's update was allowed")
		}
		return nil
	})
}

// allowRewrites removes denyRewriteOf's policy and waits until the
// fixer's update passes again.
func allowRewrites(ctx context.Context, t *testing.T, a *apiserver, namespace, name string) {
	t.Helper()
	admin := a.as(t, "admin", "e2e-setup/1.0")
	must(t, "deleting the binding", admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "e2e-keep-doohickey", metav1.DeleteOptions{}))
	must(t, "deleting the policy", admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, "e2e-keep-doohickey", metav1.DeleteOptions{}))
	waitFor(t, "the policy to be gone", time.Minute, func() error { return fixerDryRunUpdate(ctx, a, namespace, name) })
}

// fixerDryRunUpdate updates an object as the fixer with dryRun=All: through
// admission, writing nothing.
func fixerDryRunUpdate(ctx context.Context, a *apiserver, namespace, name string) error {
	dyn, err := dynamic.NewForConfig(a.config(a.tokens[fixer], probeAgent))
	if err != nil {
		return err
	}
	obj, err := dyn.Resource(doohickeys["v1"]).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	_, err = dyn.Resource(doohickeys["v1"]).Namespace(namespace).Update(ctx, obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// probeAgent is the user agent of the test's own requests as the fixer.
const probeAgent = "e2e-probe/1.0"

func ptr[T any](v T) *T { return &v }

// grantFixCRD gives the fixer exactly what `fix crd` documents it needs.
func grantFixCRD(ctx context.Context, t *testing.T, a *apiserver) {
	t.Helper()
	admin := a.as(t, "admin", "e2e-setup/1.0")
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-crd-fixer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{fixGroup}, Resources: []string{"doohickeys"}, Verbs: []string{"list", "get", "update"}},
	}}, metav1.CreateOptions{})
	must(t, "creating ClusterRole e2e-crd-fixer", err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-crd-fixer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-crd-fixer"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: fixer}}}, metav1.CreateOptions{})
	must(t, "binding e2e-crd-fixer", err)
}

// checkFixerCalledNoDeprecatedAPI reads the apiserver's audit log: the
// fixer's requests include its updates of the doohickeys, and none is
// marked deprecated.
func checkFixerCalledNoDeprecatedAPI(t *testing.T, auditLog string) {
	t.Helper()
	var requests, updates int
	var deprecated []string
	eachCompleted(t, auditLog, func(ev *auditEvent) {
		if ev.User.Username != fixer || ev.UserAgent == probeAgent {
			return
		}
		requests++
		if ev.Verb == "update" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "doohickeys" && ev.ObjectRef.APIVersion == "v1" {
			updates++
		}
		if _, ok := ev.Annotations["k8s.io/deprecated"]; ok {
			deprecated = append(deprecated, ev.Verb+" "+ev.RequestURI)
		}
	})
	// 10 before the kill, 30 with one refused, 30 at last.
	if updates != 70 || len(deprecated) > 0 {
		t.Fatalf("audit log: %s made %d requests, %d updates of doohickeys at v1 (want 70), deprecated: %v", fixer, requests, updates, deprecated)
	}
}

// etcdReader reads the doohickeys as kube-apiserver stored them, through
// etcd's JSON gateway: the apiVersion each is encoded at.
type etcdReader struct {
	db     etcd
	client *http.Client
}

const doohickeyKeys = "/registry/" + fixGroup + "/doohickeys/"

func (e etcdReader) rangeOf(t *testing.T, key, end string) []map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key)), "range_end": base64.StdEncoding.EncodeToString([]byte(end))})
	resp, err := e.client.Post(e.db.url+"/v3/kv/range", "application/json", bytes.NewReader(body))
	must(t, "reading etcd", err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	must(t, "reading etcd", err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd range %s: %s: %s", key, resp.Status, raw)
	}
	var r struct {
		KVs []struct{ Key, Value []byte } `json:"kvs"`
	}
	must(t, "decoding etcd's answer", json.Unmarshal(raw, &r))
	var out []map[string]any
	for _, kv := range r.KVs {
		var obj map[string]any
		must(t, "decoding "+string(kv.Key), json.Unmarshal(kv.Value, &obj))
		out = append(out, obj)
	}
	return out
}

// versions counts the stored doohickeys by apiVersion, probes aside.
func (e etcdReader) versions(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, obj := range e.rangeOf(t, doohickeyKeys, doohickeyKeys[:len(doohickeyKeys)-1]+"0") {
		out[obj["apiVersion"].(string)]++
	}
	return out
}

func (e etcdReader) version(t *testing.T, key string) string {
	t.Helper()
	objs := e.rangeOf(t, doohickeyKeys+key, doohickeyKeys+key+"\x00")
	if len(objs) != 1 {
		t.Fatalf("etcd holds %d objects at %s", len(objs), doohickeyKeys+key)
	}
	return objs[0]["apiVersion"].(string)
}

func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
