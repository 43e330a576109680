package test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/selfsigned"
	"github.com/kube-sunset/sunset/scan"
)

// requireOnlyNeededGrants checks the RBAC objects of a rendered install
// (TestKustomizeGrantsOnlyDelegation).
func requireOnlyNeededGrants(t *testing.T, r *rendered) {
	t.Helper()
	dir := r.dir
	type rule struct {
		APIGroups     []string `json:"apiGroups"`
		Resources     []string `json:"resources"`
		ResourceNames []string `json:"resourceNames"`
		Verbs         []string `json:"verbs"`
	}
	wantRules := map[string][]rule{
		"sunset:extension-apiserver-authentication-reader": {{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{"extension-apiserver-authentication"}, Verbs: []string{"get", "list", "watch"}}},
		"sunset:view": {{APIGroups: []string{"sunset.dev"}, Resources: []string{"apirequestcounts", "fieldrequestcounts", "webhookcounts", "upgradechecks", "serverinfo"},
			Verbs: []string{"get", "list"}}},
		"sunset:reset": {{APIGroups: []string{"sunset.dev"}, Resources: []string{"apirequestcounts"}, Verbs: []string{"delete"}}},
	}
	wantAggregation := map[string][]string{
		"sunset:view":  {"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-view"},
		"sunset:reset": {"rbac.authorization.k8s.io/aggregate-to-admin"},
	}
	wantBindings := map[string]string{
		"sunset:system:auth-delegator":                     "ClusterRole/system:auth-delegator",
		"sunset:extension-apiserver-authentication-reader": "ClusterRole/sunset:extension-apiserver-authentication-reader",
	}
	// Each binding's one subject: Sunset's ServiceAccount unless said here.
	subjects := map[string]string{}
	// Publishing the CA: the rules the publisher's requests need, in the
	// Secret's namespace, and nothing where Sunset publishes nothing.
	wantRoles := map[string][]rbacv1.PolicyRule{}
	publish := requireRealFlags(t, serveFlags(t), r.sts.Spec.Template.Spec.Containers[0].Args)["publish-ca-secret"]
	if publish != "" {
		ref, err := selfsigned.ParseSecretRef(publish)
		require.NoError(t, err, dir)
		require.Equal(t, r.sts.Namespace, ref.Namespace, "%s: the Secret is in Sunset's namespace", dir)
		wantRoles["sunset-ca-publisher"] = caPublisherRules(t, ref)
		wantBindings["sunset-ca-publisher"] = "Role/sunset-ca-publisher"
	}
	// Sunset never scans in its own pod, which takes the webhook: the
	// scan's list on Secrets is never Sunset's.
	require.Empty(t, scanInterval(t, r), "%s: Sunset scans the cluster itself", dir)
	// The cluster scan, where it is on, runs as its own ServiceAccount
	// with list on what it lists, and get and update on the ConfigMap it
	// publishes in, of which Sunset gets get only (the verbs
	// scan.Publish and scan.ReadPublished use, scan/periodic_test.go).
	if ref, ok := stsEnv(r, "SUNSET_SCAN_CONFIGMAP"); ok {
		ns, cm, err := config.ParseConfigMapRef(ref)
		require.NoError(t, err, dir)
		require.Equal(t, r.sts.Namespace, ns, "%s: the scan's ConfigMap is in Sunset's namespace", dir)
		var rules []rule
		for _, gvr := range scan.ClusterReads {
			i := slices.IndexFunc(rules, func(r rule) bool { return r.APIGroups[0] == gvr.Group })
			if i < 0 {
				rules = append(rules, rule{APIGroups: []string{gvr.Group}, Verbs: []string{"list"}})
				i = len(rules) - 1
			}
			rules[i].Resources = append(rules[i].Resources, gvr.Resource)
		}
		wantRules["sunset-scanner"] = rules
		wantBindings["sunset-scanner"] = "ClusterRole/sunset-scanner"
		subjects["sunset-scanner"] = "sunset-scanner"
		wantRoles["sunset-scan-publisher"] = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cm}, Verbs: []string{"get", "update"}}}
		wantBindings["sunset-scan-publisher"] = "Role/sunset-scan-publisher"
		subjects["sunset-scan-publisher"] = "sunset-scanner"
		wantRoles["sunset-scan-reader"] = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cm}, Verbs: []string{"get"}}}
		wantBindings["sunset-scan-reader"] = "Role/sunset-scan-reader"
	}
	gotRoles := map[string][]rbacv1.PolicyRule{}
	var gotBindings []string
	for _, obj := range r.raw {
		raw, err := json.Marshal(obj)
		require.NoError(t, err)
		meta := obj["metadata"].(map[string]any)
		name := meta["name"].(string)
		switch obj["kind"] {
		case "Role":
			var role rbacv1.Role
			require.NoError(t, json.Unmarshal(raw, &role))
			require.Equal(t, r.sts.Namespace, role.Namespace, dir)
			gotRoles[name] = role.Rules
		case "ClusterRole":
			var cr struct {
				Rules []rule `json:"rules"`
			}
			require.NoError(t, json.Unmarshal(raw, &cr))
			require.Equal(t, wantRules[name], cr.Rules, "%s: %s", dir, name)
			var agg []string
			for k := range meta["labels"].(map[string]any) {
				if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
					agg = append(agg, k)
				}
			}
			sort.Strings(agg)
			require.Equal(t, wantAggregation[name], agg, "%s: %s", dir, name)
		case "ClusterRoleBinding", "RoleBinding":
			var b struct {
				RoleRef  struct{ Kind, Name string } `json:"roleRef"`
				Subjects []struct{ Kind, Name, Namespace string }
			}
			require.NoError(t, json.Unmarshal(raw, &b))
			require.Equal(t, wantBindings[name], b.RoleRef.Kind+"/"+b.RoleRef.Name, "%s: %s", dir, name)
			require.Len(t, b.Subjects, 1)
			sa := r.sa.Name
			if s, ok := subjects[name]; ok {
				sa = s
			}
			require.Equal(t, struct{ Kind, Name, Namespace string }{"ServiceAccount", sa, r.sa.Namespace}, b.Subjects[0], "%s: %s", dir, name)
			require.Equal(t, r.sts.Spec.Template.Spec.ServiceAccountName, r.sa.Name, dir)
			gotBindings = append(gotBindings, name)
		}
	}
	require.Equal(t, wantRoles, gotRoles, "%s: the Roles Sunset's requests need", dir)
	require.ElementsMatch(t, slices.Collect(maps.Keys(wantBindings)), gotBindings, "%s: bindings", dir)
}

// caPublisherRules are the rules Sunset's CA publisher needs on the Secret
// ref, derived from the requests it makes to a Secrets API that records
// them: the first replica's publication creates the Secret; a second
// replica's adds its CA and, having lost a race once, reads and writes
// again. Requests that name the Secret give a rule restricted to its
// name; those on the collection (create) one that cannot be.
func caPublisherRules(t *testing.T, ref selfsigned.SecretRef) []rbacv1.PolicyRule {
	t.Helper()
	api := &recordingSecrets{t: t, namespace: ref.Namespace}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	// JSON, which this stand-in speaks; kube-apiserver speaks both.
	client, err := corev1client.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	require.NoError(t, err)
	for i, owner := range []string{"sunset-0", "sunset-1"} {
		p, err := selfsigned.Ensure(selfsigned.Options{Dir: t.TempDir(), Owner: owner})
		require.NoError(t, err)
		api.conflicts = i
		wrote, err := selfsigned.Publish(t.Context(), client, ref, p.CAPEM, time.Now())
		require.NoError(t, err)
		require.True(t, wrote, owner)
	}
	require.Zero(t, api.conflicts, "the race was run")
	named, collection := map[string]bool{}, map[string]bool{}
	for _, req := range api.requests {
		if req.name == "" {
			collection[req.verb] = true
		} else {
			require.Equal(t, ref.Name, req.name, "the publisher touches its own Secret only")
			named[req.verb] = true
		}
	}
	var rules []rbacv1.PolicyRule
	if len(collection) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: slices.Sorted(maps.Keys(collection))})
	}
	if len(named) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{ref.Name},
			Verbs: slices.Sorted(maps.Keys(named))})
	}
	return rules
}

// recordingSecrets is the Secrets API of one namespace, as kube-apiserver
// answers it (JSON objects, Status errors, resourceVersion checks), that
// records each request's verb and name. It answers Conflict to the next
// conflicts updates, as when another writer was first.
type recordingSecrets struct {
	t         *testing.T
	namespace string
	conflicts int

	mu       sync.Mutex
	secrets  map[string]*corev1.Secret
	version  int
	requests []struct{ verb, name string }
}

func (a *recordingSecrets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.secrets == nil {
		a.secrets = map[string]*corev1.Secret{}
	}
	prefix := "/api/v1/namespaces/" + a.namespace + "/secrets"
	tail, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		a.t.Errorf("the publisher asked for %s %s, outside Secrets of namespace %s", r.Method, r.URL.Path, a.namespace)
		http.NotFound(w, r)
		return
	}
	name := strings.TrimPrefix(tail, "/")
	verbs := map[string]string{http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}
	a.requests = append(a.requests, struct{ verb, name string }{verbs[r.Method], name})
	status := func(code int, reason metav1.StatusReason) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Code: int32(code), Reason: reason, Details: &metav1.StatusDetails{Name: name, Kind: "secrets"}})
	}
	reply := func(code int, s *corev1.Secret) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(s)
	}
	var in corev1.Secret
	if r.Body != nil && r.Method != http.MethodGet {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			a.t.Errorf("%s %s: %v (Content-Type %s)", r.Method, r.URL.Path, err, r.Header.Get("Content-Type"))
			status(http.StatusBadRequest, metav1.StatusReasonBadRequest)
			return
		}
	}
	stored, exists := a.secrets[name]
	switch {
	case r.Method == http.MethodGet && exists:
		reply(http.StatusOK, stored)
	case r.Method == http.MethodGet:
		status(http.StatusNotFound, metav1.StatusReasonNotFound)
	case r.Method == http.MethodPost && name == "":
		if _, taken := a.secrets[in.Name]; taken {
			status(http.StatusConflict, metav1.StatusReasonAlreadyExists)
			return
		}
		a.version++
		in.ResourceVersion = strconv.Itoa(a.version)
		a.secrets[in.Name] = &in
		reply(http.StatusCreated, &in)
	case r.Method == http.MethodPut && exists:
		if a.conflicts > 0 || in.ResourceVersion != stored.ResourceVersion {
			a.conflicts = max(a.conflicts-1, 0)
			// Another writer was first: its write is what a new read sees.
			a.version++
			stored.ResourceVersion = strconv.Itoa(a.version)
			status(http.StatusConflict, metav1.StatusReasonConflict)
			return
		}
		a.version++
		in.ResourceVersion = strconv.Itoa(a.version)
		a.secrets[name] = &in
		reply(http.StatusOK, &in)
	default:
		status(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
	}
}
