package test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// sunsetAPI is the group and version Sunset serves.
const sunsetAPI = "/apis/sunset.dev/v1"

// clusterRoles are the ClusterRoles a kustomization renders, by name.
func clusterRoles(t *testing.T, r *rendered) map[string]rbacv1.ClusterRole {
	t.Helper()
	roles := map[string]rbacv1.ClusterRole{}
	for _, obj := range r.raw {
		if obj["kind"] != "ClusterRole" {
			continue
		}
		raw, err := json.Marshal(obj)
		require.NoError(t, err)
		var cr rbacv1.ClusterRole
		require.NoError(t, json.Unmarshal(raw, &cr))
		roles[cr.Name] = cr
	}
	return roles
}

// ruleAllows is RBAC's rule match (k8s.io/kubernetes
// plugin/pkg/auth/authorizer/rbac: RuleAllows) for resource requests.
func ruleAllows(rule rbacv1.PolicyRule, a *authzv1.ResourceAttributes) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	return has(rule.Verbs, a.Verb) && has(rule.APIGroups, a.Group) && has(rule.Resources, resource) &&
		(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, a.Name))
}

// fakeKubeAPIServer answers Sunset's delegated TokenReviews and
// SubjectAccessReviews as kube-apiserver would with RBAC: the token
// "viewer" is user viewer, bound to the given role; the token "nobody" is
// a user bound to nothing. Every authenticated user may GET the discovery
// paths (system:discovery). It records the resource attributes Sunset
// asked about.
type fakeKubeAPIServer struct {
	role rbacv1.ClusterRole

	mu    sync.Mutex
	asked []authzv1.ResourceAttributes
}

func (f *fakeKubeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch tr.Spec.Token {
		case "viewer", "nobody":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true,
				User: authnv1.UserInfo{Username: tr.Spec.Token, Groups: []string{"system:authenticated"}}}
		default:
			tr.Status = authnv1.TokenReviewStatus{Authenticated: false}
		}
		writeJSON(w, tr)
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var sar authzv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if a := sar.Spec.ResourceAttributes; a != nil {
			f.mu.Lock()
			f.asked = append(f.asked, *a)
			f.mu.Unlock()
			sar.Status.Allowed = sar.Spec.User == "viewer" && slices.ContainsFunc(f.role.Rules, func(rule rbacv1.PolicyRule) bool { return ruleAllows(rule, a) })
		} else if a := sar.Spec.NonResourceAttributes; a != nil {
			sar.Status.Allowed = a.Verb == "get" && (a.Path == "/apis" || strings.HasPrefix(a.Path, "/apis/"))
		}
		writeJSON(w, sar)
	default:
		http.Error(w, "not served by this fake", http.StatusNotFound)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// askedResources are the sunset.dev resources Sunset asked about.
func (f *fakeKubeAPIServer) askedResources() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.asked {
		if a.Group == "sunset.dev" {
			out = append(out, a.Resource)
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// kubeconfigFor writes a kubeconfig that reaches server.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+server+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	return path
}

// readResources are every resource Sunset serves to readers, from Sunset's
// own code: the resources a running server's discovery lists with get or
// list, and those its page and its client read (the page's first call,
// serverinfo, is one that discovery once left out).
func readResources(t *testing.T, discovery metav1.APIResourceList) []string {
	t.Helper()
	var out []string
	for _, r := range discovery.APIResources {
		if slices.Contains(r.Verbs, "get") || slices.Contains(r.Verbs, "list") {
			out = append(out, r.Name)
		}
	}
	require.NotEmpty(t, out, "discovery lists no readable resource")

	page, err := os.ReadFile("../web/assets/app.js")
	require.NoError(t, err)
	calls := regexp.MustCompile("(?:^|[^.\\w])get\\(\\s*['`]([a-z]+)").FindAllStringSubmatch(string(page), -1)
	require.NotEmpty(t, calls, "the page's get('<resource>') calls")
	for _, m := range calls {
		out = append(out, m[1])
	}

	clientFiles, err := filepath.Glob("../client/*.go")
	require.NoError(t, err)
	var fromClient int
	for _, f := range clientFiles {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`"`+regexp.QuoteMeta(sunsetAPI)+`/([a-z]+)`).FindAllStringSubmatch(string(src), -1) {
			out = append(out, m[1])
			fromClient++
		}
	}
	require.NotZero(t, fromClient, "the client's paths under %s", sunsetAPI)
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// sunset:view covers every resource Sunset serves to readers, derived from
// a running Sunset rather than written down here: a reader bound to it
// alone gets no 403 from any of them, with Sunset's own authorization
// checks delegated to a kube-apiserver that applies the rendered role.
func TestRBACViewCoversEveryReadResource(t *testing.T) {
	kubectl(t)
	view, ok := clusterRoles(t, render(t, "kubernetes/base"))["sunset:view"]
	require.True(t, ok, "the base renders ClusterRole sunset:view")
	fake := &fakeKubeAPIServer{role: view}
	kube := httptest.NewServer(fake)
	t.Cleanup(kube.Close)

	cfg := testserver.Config(t)
	cfg.AuthenticationKubeconfig = kubeconfigFor(t, kube.URL)
	cfg.AuthorizationKubeconfig = cfg.AuthenticationKubeconfig
	cfg.AuthenticationSkipLookup = true
	s := testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t)})

	client := &http.Client{Timeout: 10 * time.Second}
	get := func(token, path string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	code, body := get("viewer", sunsetAPI)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var discovery metav1.APIResourceList
	require.NoError(t, json.Unmarshal(body, &discovery))
	require.Equal(t, "sunset.dev/v1", discovery.GroupVersion)
	resources := readResources(t, discovery)

	// The role names exactly those resources, get and list, in one rule.
	require.Len(t, view.Rules, 1)
	rule := view.Rules[0]
	require.Equal(t, []string{"sunset.dev"}, rule.APIGroups)
	require.Equal(t, []string{"get", "list"}, rule.Verbs)
	require.Empty(t, rule.ResourceNames)
	require.Equal(t, resources, slices.Sorted(slices.Values(rule.Resources)), "sunset:view's resources")

	// A list and a get of each, as a viewer and as a user with no role:
	// Sunset asks kube-apiserver, which the role alone satisfies.
	for _, res := range resources {
		for _, path := range []string{sunsetAPI + "/" + res, sunsetAPI + "/" + res + "/1.37"} {
			code, body := get("viewer", path)
			require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, code, "viewer GET %s: %s", path, body)
			code, body = get("nobody", path)
			require.Equal(t, http.StatusForbidden, code, "nobody GET %s: %s", path, body)
		}
	}
	asked := fake.askedResources()
	sort.Strings(resources)
	require.Equal(t, resources, asked, "Sunset authorizes each read as its resource")
}
