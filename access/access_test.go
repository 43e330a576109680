package access

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

// pkis are the three CAs a deployment has: the serving CA, the CA of
// readers' client certificates and the front-proxy CA of kube-apiserver's
// aggregator.
type pkis struct {
	serving, readers, frontProxy *testpki.CA
}

// serveWrapped serves a stand-in for Sunset's routes behind Wrap, over TLS that
// asks for client certificates as app does. Each answer names the user.
func serveWrapped(t *testing.T, a *Access, p pkis) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	whoami := func(w http.ResponseWriter, r *http.Request) {
		who := "nobody"
		if u, ok := request.UserFrom(r.Context()); ok {
			who = u.GetName()
		}
		fmt.Fprintf(w, "%s %s as %s", r.Method, r.URL.Path, who)
	}
	for _, p := range []string{"/apis/sunset.dev/v1/apirequestcounts", "/apis/sunset.dev/v1/apirequestcounts/{name}", "/metrics", "/-/ready", "/apis"} {
		mux.HandleFunc(p, whoami)
	}
	srv := httptest.NewUnstartedServer(a.Wrap(mux))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.ClientCABundle())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.serving.Server(t, "127.0.0.1").TLS(t)},
		ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// caller is one way of calling: credentials and headers.
type caller struct {
	token   string
	cert    *testpki.Pair
	headers map[string]string
}

func (c caller) do(t *testing.T, srv *httptest.Server, roots *x509.CertPool, method, path string) (int, string) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	if c.cert != nil {
		tr.TLSClientConfig.Certificates = []tls.Certificate{c.cert.TLS(t)}
	}
	req, err := http.NewRequest(method, srv.URL+path, nil)
	require.NoError(t, err)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// Without a cluster: a token file and client certificates identify
// callers, groups decide, and the front-proxy headers count only with the
// front-proxy certificate.
func TestLocalAuthenticationAndGroups(t *testing.T) {
	p := pkis{serving: testpki.NewCA(t, "serving"), readers: testpki.NewCA(t, "readers"), frontProxy: testpki.NewCA(t, "front-proxy")}
	dir := t.TempDir()
	o := Options{
		TokenAuthFile: testpki.WriteFile(t, dir, "tokens.csv", []byte(
			"alice-token,alice,1001,\"sunset:readers\"\nroot-token,root,1002,\"sunset:admins,ops\"\nmallory-token,mallory,1003,\"dev\"\n")),
		ClientCAFile: testpki.WriteFile(t, dir, "readers.crt", p.readers.PEM),
		RequestHeader: RequestHeader{
			ClientCAFile: testpki.WriteFile(t, dir, "front-proxy.crt", p.frontProxy.PEM), AllowedNames: []string{"front-proxy-client"},
			UsernameHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"}, ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
		},
		ReadGroups: []string{DefaultReadGroup}, ResetGroups: []string{DefaultResetGroup}, AlwaysAllowPaths: DefaultAlwaysAllowPaths,
	}
	require.False(t, o.delegatesAuthorization(), "the test runs outside a pod")
	a, err := New(context.Background(), o)
	require.NoError(t, err)
	srv := serveWrapped(t, a, p)
	roots := p.serving.Pool()

	carol := p.readers.Client(t, "carol", "sunset:readers")
	dave := p.readers.Client(t, "dave", "dev")
	proxy := p.frontProxy.Client(t, "front-proxy-client")
	otherProxy := p.frontProxy.Client(t, "someone-else")
	forged := map[string]string{"X-Remote-User": "root", "X-Remote-Group": "sunset:admins"}
	list, one := "/apis/sunset.dev/v1/apirequestcounts", "/apis/sunset.dev/v1/apirequestcounts/endpoints.v1"
	tests := []struct {
		name         string
		c            caller
		method, path string
		code         int
		body         string
	}{
		{"no credentials", caller{}, "GET", list, 401, "Unauthorized"},
		{"no credentials, health", caller{}, "GET", "/-/ready", 200, "GET /-/ready as nobody"},
		{"no credentials, metrics", caller{}, "GET", "/metrics", 401, "Unauthorized"},
		{"wrong token", caller{token: "guess"}, "GET", list, 401, "Unauthorized"},
		{"reader lists", caller{token: "alice-token"}, "GET", list, 200, "GET " + list + " as alice"},
		{"reader gets", caller{token: "alice-token"}, "GET", one, 200, "GET " + one + " as alice"},
		{"reader scrapes", caller{token: "alice-token"}, "GET", "/metrics", 200, "GET /metrics as alice"},
		{"reader cannot reset", caller{token: "alice-token"}, "DELETE", one, 403, `User \"alice\" cannot delete resource \"apirequestcounts\" in API group \"sunset.dev\"`},
		{"admin resets", caller{token: "root-token"}, "DELETE", one, 200, "DELETE " + one + " as root"},
		{"other group", caller{token: "mallory-token"}, "GET", list, 403, `User \"mallory\" cannot list resource \"apirequestcounts\" in API group \"sunset.dev\"`},
		{"reader certificate", caller{cert: &carol}, "GET", list, 200, "GET " + list + " as carol"},
		{"certificate of another group", caller{cert: &dave}, "GET", list, 403, `User \"dave\" cannot list`},
		{"forged headers alone", caller{headers: forged}, "DELETE", one, 401, "Unauthorized"},
		{"forged headers with a reader token", caller{token: "alice-token", headers: forged}, "DELETE", one, 403, `User \"alice\" cannot delete`},
		{"forged headers with a reader certificate", caller{cert: &carol, headers: forged}, "DELETE", one, 403, `User \"carol\" cannot delete`},
		{"front proxy", caller{cert: &proxy, headers: map[string]string{"X-Remote-User": "erin", "X-Remote-Group": "sunset:readers"}}, "GET", list, 200, "GET " + list + " as erin"},
		{"front proxy, no reset", caller{cert: &proxy, headers: map[string]string{"X-Remote-User": "erin", "X-Remote-Group": "sunset:readers"}}, "DELETE", one, 403, `User \"erin\" cannot delete`},
		{"front-proxy CA, name not allowed", caller{cert: &otherProxy, headers: forged}, "GET", list, 401, "Unauthorized"},
		{"front-proxy certificate without headers", caller{cert: &proxy}, "GET", list, 401, "Unauthorized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := tc.c.do(t, srv, roots, tc.method, tc.path)
			require.Equal(t, tc.code, code, body)
			require.Contains(t, body, tc.body)
			if code >= 400 {
				var st struct{ Kind, Reason string }
				require.NoError(t, json.Unmarshal([]byte(body), &st), body)
				require.Equal(t, "Status", st.Kind)
			}
		})
	}
}

// recorder is a hand fake of the authorizer interface: it allows
// everything and records what it was asked.
type recorder struct {
	mu    sync.Mutex
	asked []string
}

func (r *recorder) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.IsResourceRequest() {
		r.asked = append(r.asked, fmt.Sprintf("%s %s/%s %s %q", a.GetUser().GetName(), a.GetAPIGroup(), a.GetAPIVersion(), a.GetVerb(), a.GetResource()+"/"+a.GetName()))
	} else {
		r.asked = append(r.asked, fmt.Sprintf("%s %s %s", a.GetUser().GetName(), a.GetVerb(), a.GetPath()))
	}
	return authorizer.DecisionAllow, "", nil
}

// The questions Sunset puts to kube-apiserver's SubjectAccessReview are the
// ones RBAC rules are written for: get, list and delete on
// apirequestcounts.sunset.dev, and get on non-resource URLs.
func TestAuthorizationAttributes(t *testing.T) {
	p := pkis{serving: testpki.NewCA(t, "serving")}
	o := Options{TokenAuthFile: testpki.WriteFile(t, t.TempDir(), "tokens.csv", []byte("t,alice,1,\"dev\"\n")), AlwaysAllowPaths: DefaultAlwaysAllowPaths}
	a, err := New(context.Background(), o)
	require.NoError(t, err)
	rec := &recorder{}
	a.authz = rec
	srv := serveWrapped(t, a, p)
	alice := caller{token: "t"}
	for _, call := range [][2]string{{"GET", "/apis/sunset.dev/v1/apirequestcounts"}, {"GET", "/apis/sunset.dev/v1/apirequestcounts/cronjobs.v1beta1.batch"},
		{"DELETE", "/apis/sunset.dev/v1/apirequestcounts/cronjobs.v1beta1.batch"}, {"GET", "/metrics"}, {"GET", "/apis"}, {"GET", "/-/ready"}} {
		code, body := alice.do(t, srv, p.serving.Pool(), call[0], call[1])
		require.Equal(t, 200, code, body)
	}
	require.Equal(t, []string{
		`alice sunset.dev/v1 list "apirequestcounts/"`,
		`alice sunset.dev/v1 get "apirequestcounts/cronjobs.v1beta1.batch"`,
		`alice sunset.dev/v1 delete "apirequestcounts/cronjobs.v1beta1.batch"`,
		"alice get /metrics",
		"alice get /apis",
	}, rec.asked, "health checks are not asked about")
}

// The group authorizer: reads for readers and resetters, resets for
// resetters, nothing on other groups' resources.
func TestGroupAuthorizer(t *testing.T) {
	g := groupAuthorizer{read: setOf("r"), reset: setOf("a")}
	for _, tc := range []struct {
		groups   []string
		resource bool
		group    string
		verb     string
		want     authorizer.Decision
	}{
		{[]string{"r"}, true, "sunset.dev", "list", authorizer.DecisionAllow},
		{[]string{"r"}, true, "sunset.dev", "delete", authorizer.DecisionNoOpinion},
		{[]string{"a"}, true, "sunset.dev", "delete", authorizer.DecisionAllow},
		{[]string{"a"}, true, "sunset.dev", "get", authorizer.DecisionAllow},
		{[]string{"r"}, false, "", "get", authorizer.DecisionAllow},
		{[]string{"a"}, false, "", "post", authorizer.DecisionNoOpinion},
		{[]string{"a"}, true, "", "get", authorizer.DecisionNoOpinion},
		{[]string{"x"}, true, "sunset.dev", "get", authorizer.DecisionNoOpinion},
	} {
		attrs := authorizer.AttributesRecord{User: userWithGroups(tc.groups), ResourceRequest: tc.resource, APIGroup: tc.group, Verb: tc.verb, Resource: "apirequestcounts"}
		got, _, err := g.Authorize(context.Background(), attrs)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%+v", tc)
	}
}

// Non-loopback listening needs some way to identify callers.
func TestAuthenticates(t *testing.T) {
	require.False(t, Options{}.Authenticates())
	for _, o := range []Options{{TokenAuthFile: "f"}, {ClientCAFile: "f"}, {AuthenticationKubeconfig: "f"}, {RequestHeader: RequestHeader{ClientCAFile: "f"}}} {
		require.True(t, o.Authenticates(), "%+v", o)
	}
}

func setOf(s ...string) sets.Set[string] { return sets.New(s...) }

func userWithGroups(groups []string) user.Info {
	return &user.DefaultInfo{Name: "u", Groups: groups}
}

// The Service variables that kubelet injects into every pod, static pods
// included once it has synced Services, do not make Sunset delegate: only
// a mounted service-account token does. Without one, it authenticates and
// authorizes exactly as outside a cluster.
func TestInClusterNeedsAServiceAccountToken(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	dir := t.TempDir()
	tokens := testpki.WriteFile(t, dir, "tokens.csv", []byte("alice-token,alice,1001,\"sunset:readers\"\n"))
	local := Options{TokenAuthFile: tokens, ServiceAccountTokenFile: dir + "/absent",
		ReadGroups: []string{DefaultReadGroup}, ResetGroups: []string{DefaultResetGroup}, AlwaysAllowPaths: DefaultAlwaysAllowPaths}
	require.False(t, local.InCluster())
	require.False(t, local.DelegatesAuthentication())
	require.False(t, local.delegatesAuthorization())
	require.False(t, Options{ServiceAccountTokenFile: dir + "/absent"}.Authenticates(), "nothing else authenticates")

	a, err := New(context.Background(), local)
	require.NoError(t, err)
	p := pkis{serving: testpki.NewCA(t, "serving")}
	srv := serveWrapped(t, a, p)
	list := "/apis/sunset.dev/v1/apirequestcounts"
	code, body := caller{token: "alice-token"}.do(t, srv, p.serving.Pool(), "GET", list)
	require.Equal(t, 200, code, body)
	require.Equal(t, "GET "+list+" as alice", body, "the local groups decide, as without a cluster")
	code, _ = caller{token: "alice-token"}.do(t, srv, p.serving.Pool(), "GET", "/metrics")
	require.Equal(t, 200, code)

	mounted := local
	mounted.ServiceAccountTokenFile = testpki.WriteFile(t, dir, "token", []byte("a service-account token"))
	require.True(t, mounted.InCluster())
	require.True(t, mounted.DelegatesAuthentication())
	require.True(t, mounted.delegatesAuthorization())
	require.True(t, Options{ServiceAccountTokenFile: mounted.ServiceAccountTokenFile}.Authenticates())

	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	require.False(t, mounted.InCluster(), "a token without the Service variables is no pod either")
}

// Permits tells whether a caller may do what Wrap would let it do, for
// answers an open path gives in full only to some.
func TestPermits(t *testing.T) {
	dir := t.TempDir()
	o := Options{
		TokenAuthFile: testpki.WriteFile(t, dir, "tokens.csv", []byte(
			"alice-token,alice,1001,\"sunset:readers\"\nmallory-token,mallory,1003,\"dev\"\n")),
		ReadGroups: []string{DefaultReadGroup}, ResetGroups: []string{DefaultResetGroup}, AlwaysAllowPaths: DefaultAlwaysAllowPaths,
	}
	a, err := New(context.Background(), o)
	require.NoError(t, err)
	for _, tc := range []struct {
		token string
		want  bool
	}{{"", false}, {"guess", false}, {"mallory-token", false}, {"alice-token", true}} {
		r := httptest.NewRequest(http.MethodGet, "/-/ready?verbose", nil)
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+tc.token)
		}
		require.Equal(t, tc.want, a.Permits(r, "get", "/metrics"), tc.token)
	}
	open, err := New(context.Background(), Options{Open: true})
	require.NoError(t, err)
	require.True(t, open.Permits(httptest.NewRequest(http.MethodGet, "/-/ready?verbose", nil), "get", "/metrics"))
}
