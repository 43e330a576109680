package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1beta1 "k8s.io/api/storage/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// The clients of the test, each with its own user agent. Sunset keeps the
// user agent up to its first space.
const (
	aliceAgent   = "alice-deployer/1.4 (linux/amd64)"
	bobAgent     = "bob-script/2.0"
	pollerAgent  = "bob-poller/1.0"
	carolAgent   = "carol-cli/0.3"
	malloryAgent = "curl/8.5.0"
	legacyAgent  = "legacy-sync/0.9"
)

// The workload behind the pod-bound token.
const (
	appsNamespace  = "e2e-apps"
	legacyAccount  = "legacy-sync"
	legacyPod      = "legacy-sync-7d9f8b6c5-x2kqz"
	legacyNode     = "node-a"
	trafficNS      = "e2e"
	widgetGroup    = "e2e.example.com"
	legacyUsername = "system:serviceaccount:" + appsNamespace + ":" + legacyAccount
)

var (
	widgetsV1beta1 = schema.GroupVersionResource{Group: widgetGroup, Version: "v1beta1", Resource: "widgets"}
	crds           = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// traffic makes the requests of the test against a prepared cluster.
type traffic struct {
	t       *testing.T
	a       *apiserver
	admin   *kubernetes.Clientset
	alice   dynamic.Interface
	legacy  *kubernetes.Clientset
	clients map[string]*kubernetes.Clientset
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// prepare creates, as admin, what the traffic needs: a CRD whose v1beta1 is
// deprecated, namespaces, RBAC for the users (not mallory), and a pod on a
// node whose service account token the legacy client uses.
func prepare(t *testing.T, a *apiserver) *traffic {
	t.Helper()
	ctx := ctxWithin(t, 2*time.Minute)
	tr := &traffic{t: t, a: a, admin: a.as(t, "admin", "e2e-setup/1.0"), clients: map[string]*kubernetes.Clientset{}}
	for _, ns := range []string{trafficNS, appsNamespace} {
		_, err := tr.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, "creating namespace "+ns, err)
	}
	for _, u := range []string{"alice", "bob", "carol", "dave", "erin"} {
		_, err := tr.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + u},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: u}},
		}, metav1.CreateOptions{})
		must(t, "binding "+u, err)
	}

	dyn, err := dynamic.NewForConfig(a.config(a.tokens["admin"], "e2e-setup/1.0"))
	must(t, "dynamic client", err)
	_, err = dyn.Resource(crds).Create(ctx, deprecatedCRD(widgetGroup, "Widget"), metav1.CreateOptions{})
	must(t, "creating the widgets CRD", err)

	tr.legacyWorkload(ctx)
	tr.clients["bob"] = a.as(t, "bob", bobAgent)
	tr.clients["poller"] = a.as(t, "bob", pollerAgent)
	tr.clients["carol"] = a.as(t, "carol", carolAgent)
	tr.clients["mallory"] = a.as(t, "mallory", malloryAgent)
	tr.clients["alice"] = a.as(t, "alice", aliceAgent)
	tr.alice, err = dynamic.NewForConfig(a.config(a.tokens["alice"], aliceAgent))
	must(t, "dynamic client", err)

	// The CRD's versions are served a moment after it is established. Wait
	// on discovery and on the version that is not deprecated, so the wait
	// adds no deprecated requests.
	widgetsV1 := widgetsV1beta1
	widgetsV1.Version = "v1"
	waitFor(t, "widgets to be served", time.Minute, func() error {
		resources, err := tr.admin.Discovery().ServerResourcesForGroupVersion(widgetGroup + "/v1beta1")
		if err != nil {
			return err
		}
		if len(resources.APIResources) == 0 {
			return errNotYet
		}
		_, err = dyn.Resource(widgetsV1).Namespace(trafficNS).List(ctx, metav1.ListOptions{})
		return err
	})
	return tr
}

// deprecatedCRD defines a namespaced custom resource whose v1beta1 is
// deprecated and whose v1 is stored. The kind's plural and singular are
// its name lower-cased, with an s.
func deprecatedCRD(group, kind string) *unstructured.Unstructured {
	singular := strings.ToLower(kind)
	schemaAny := map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": singular + "s." + group},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": singular + "s", "singular": singular, "kind": kind, "listKind": kind + "List"},
			"versions": []any{
				map[string]any{"name": "v1beta1", "served": true, "storage": false, "deprecated": true, "schema": schemaAny},
				map[string]any{"name": "v1", "served": true, "storage": true, "schema": schemaAny},
			},
		},
	}}
}

// legacyWorkload creates a node, a pod bound to it and a token bound to the
// pod, the way the kubelet asks for one, and a client that uses it.
func (tr *traffic) legacyWorkload(ctx context.Context) {
	t := tr.t
	_, err := tr.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: legacyNode}}, metav1.CreateOptions{})
	must(t, "creating node", err)
	_, err = tr.admin.CoreV1().ServiceAccounts(appsNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: legacyAccount}}, metav1.CreateOptions{})
	must(t, "creating service account", err)
	_, err = tr.admin.RbacV1().Roles(appsNamespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "endpoints-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"endpoints"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	must(t, "creating role", err)
	_, err = tr.admin.RbacV1().RoleBindings(appsNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "endpoints-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "endpoints-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: legacyAccount, Namespace: appsNamespace}},
	}, metav1.CreateOptions{})
	must(t, "creating role binding", err)
	noToken := false
	pod, err := tr.admin.CoreV1().Pods(appsNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: legacyPod},
		Spec: corev1.PodSpec{
			NodeName:                     legacyNode,
			ServiceAccountName:           legacyAccount,
			AutomountServiceAccountToken: &noToken,
			Containers:                   []corev1.Container{{Name: "sync", Image: "registry.example/legacy-sync:1"}},
		},
	}, metav1.CreateOptions{})
	must(t, "creating pod", err)
	expiry := int64(3600)
	tok, err := tr.admin.CoreV1().ServiceAccounts(appsNamespace).CreateToken(ctx, legacyAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &expiry,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: types.UID(pod.UID)},
		},
	}, metav1.CreateOptions{})
	must(t, "requesting a pod-bound token", err)
	tr.legacy = tr.a.clientFor(t, tok.Status.Token, legacyAgent)
}

// round makes one round of requests: every deprecated API with several
// verbs, a dry run, an already-removed API, a forbidden request and
// requests to APIs that are not deprecated. Its counts are in roundCounts.
func (tr *traffic) round(ctx context.Context, n int) {
	t := tr.t
	name := fmt.Sprintf("w-%d", n)
	widgets := tr.alice.Resource(widgetsV1beta1).Namespace(trafficNS)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetGroup + "/v1beta1", "kind": "Widget",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"size": int64(n)},
	}}
	_, err := widgets.Create(ctx, w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	must(t, "dry-run create widget", err)
	_, err = widgets.Create(ctx, w, metav1.CreateOptions{})
	must(t, "create widget", err)
	got, err := widgets.Get(ctx, name, metav1.GetOptions{})
	must(t, "get widget", err)
	_, err = widgets.List(ctx, metav1.ListOptions{})
	must(t, "list widgets", err)
	must(t, "set spec", unstructured.SetNestedField(got.Object, "large", "spec", "size"))
	_, err = widgets.Update(ctx, got, metav1.UpdateOptions{})
	must(t, "update widget", err)
	_, err = widgets.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"color":"red"}}`), metav1.PatchOptions{})
	must(t, "patch widget", err)
	// A watch is counted when it ends: let the server end it after 1 s.
	timeout := int64(1)
	watch, err := widgets.Watch(ctx, metav1.ListOptions{TimeoutSeconds: &timeout})
	must(t, "watch widgets", err)
	for range watch.ResultChan() {
	}
	must(t, "delete widget", widgets.Delete(ctx, name, metav1.DeleteOptions{}))

	bob := tr.clients["bob"].CoreV1().Endpoints(trafficNS)
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ep-%d", n)}}
	_, err = bob.Create(ctx, ep, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	must(t, "dry-run create endpoints", err)
	_, err = bob.Create(ctx, ep, metav1.CreateOptions{})
	must(t, "create endpoints", err)
	_, err = bob.Get(ctx, ep.Name, metav1.GetOptions{})
	must(t, "get endpoints", err)
	_, err = bob.List(ctx, metav1.ListOptions{})
	must(t, "list endpoints", err)
	must(t, "delete endpoints", bob.Delete(ctx, ep.Name, metav1.DeleteOptions{}))

	// batch/v1beta1 CronJob was removed in 1.25: the client gets a 404.
	err = tr.clients["bob"].CoreV1().RESTClient().Get().AbsPath("/apis/batch/v1beta1/namespaces", trafficNS, "cronjobs").Do(ctx).Error()
	if !apierrors.IsNotFound(err) {
		t.Fatalf("listing batch/v1beta1 cronjobs: want a 404, got %v", err)
	}

	carol := tr.clients["carol"]
	_, err = carol.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	must(t, "list componentstatuses", err)
	vacs := carol.StorageV1beta1().VolumeAttributesClasses()
	vac := &storagev1beta1.VolumeAttributesClass{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gold-%d", n)},
		DriverName: "csi.example.com",
		Parameters: map[string]string{"iops": "3000"},
	}
	_, err = vacs.Create(ctx, vac, metav1.CreateOptions{})
	must(t, "create volumeattributesclass", err)
	_, err = vacs.Get(ctx, vac.Name, metav1.GetOptions{})
	must(t, "get volumeattributesclass", err)
	must(t, "delete volumeattributesclass", vacs.Delete(ctx, vac.Name, metav1.DeleteOptions{}))

	for range 2 {
		_, err = tr.legacy.CoreV1().Endpoints(appsNamespace).List(ctx, metav1.ListOptions{})
		must(t, "list endpoints with the pod-bound token", err)
	}

	_, err = tr.clients["mallory"].CoreV1().Endpoints("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("mallory listing endpoints: want a 403, got %v", err)
	}

	alice := tr.clients["alice"]
	_, err = alice.CoreV1().ConfigMaps(trafficNS).List(ctx, metav1.ListOptions{})
	must(t, "list configmaps", err)
	_, err = alice.DiscoveryV1().EndpointSlices(trafficNS).List(ctx, metav1.ListOptions{})
	must(t, "list endpointslices", err)
}

// roundCounts are the deprecated requests one round makes, per API, client
// and verb, as {requests, dry runs}. They check the audit log itself: a
// ground truth that missed the traffic would make every comparison empty.
var roundCounts = map[clientVerb]counts{
	{"widgets.v1beta1.e2e.example.com", "alice", "alice-deployer/1.4", "create"}:           {2, 1},
	{"widgets.v1beta1.e2e.example.com", "alice", "alice-deployer/1.4", "get"}:              {1, 0},
	{"widgets.v1beta1.e2e.example.com", "alice", "alice-deployer/1.4", "list"}:             {1, 0},
	{"widgets.v1beta1.e2e.example.com", "alice", "alice-deployer/1.4", "update"}:           {1, 0},
	{"widgets.v1beta1.e2e.example.com", "alice", "alice-deployer/1.4", "patch"}:            {1, 0},
	{"widgets.v1beta1.e2e.example.com", "alice", "alice-deployer/1.4", "watch"}:            {1, 0},
	{"widgets.v1beta1.e2e.example.com", "alice", "alice-deployer/1.4", "delete"}:           {1, 0},
	{"endpoints.v1", "bob", "bob-script/2.0", "create"}:                                    {2, 1},
	{"endpoints.v1", "bob", "bob-script/2.0", "get"}:                                       {1, 0},
	{"endpoints.v1", "bob", "bob-script/2.0", "list"}:                                      {1, 0},
	{"endpoints.v1", "bob", "bob-script/2.0", "delete"}:                                    {1, 0},
	{"cronjobs.v1beta1.batch", "bob", "bob-script/2.0", "list"}:                            {1, 0},
	{"componentstatuses.v1", "carol", "carol-cli/0.3", "list"}:                             {1, 0},
	{"volumeattributesclasses.v1beta1.storage.k8s.io", "carol", "carol-cli/0.3", "create"}: {1, 0},
	{"volumeattributesclasses.v1beta1.storage.k8s.io", "carol", "carol-cli/0.3", "get"}:    {1, 0},
	{"volumeattributesclasses.v1beta1.storage.k8s.io", "carol", "carol-cli/0.3", "delete"}: {1, 0},
	{"endpoints.v1", legacyUsername, "legacy-sync/0.9", "list"}:                            {2, 0},
}

// poll reads the deprecated Endpoints of the default namespace every 100 ms
// until stopped, so requests are in flight whenever Sunset is killed.
func (tr *traffic) poll(ctx context.Context) (stop func() int) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var n int
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := tr.clients["poller"].CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			if err == nil || apierrors.IsNotFound(err) {
				n++
			}
		}
	}()
	return func() int { cancel(); wg.Wait(); return n }
}

// waitFor polls f until it succeeds, with the poller Kubernetes' own tests
// use. It waits on the peers, separate processes whose progress has no
// other hook.
func waitFor(t *testing.T, what string, timeout time.Duration, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}
