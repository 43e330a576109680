package connect

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/cli"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// apiServer stands in for kube-apiserver on a loopback port: to callers
// with its token, it serves sunset.dev/v1 as the aggregator does, by
// proxying to a real Sunset, and answers every other path as
// kube-apiserver answers for a group it does not serve.
type apiServer struct {
	url string
	// ca is the PEM of the CA that signed its certificate, caFile the
	// same in a file.
	ca     []byte
	caFile string
	mu     sync.Mutex
	heard  []http.Header
}

// testNow is the clock of the Sunset behind the apiserver and of the
// reports, minutes after its one request.
var testNow = time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)

// oneRequest is what the Sunset behind the apiserver has counted: a
// client of the already-removed batch/v1beta1 CronJob.
const oneRequest = `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"cj-1","stage":"ResponseComplete","verb":"list",
"user":{"username":"bob"},"userAgent":"helm/v3.14.0","objectRef":{"resource":"cronjobs","apiGroup":"batch","apiVersion":"v1beta1"},
"responseStatus":{"code":404},"requestReceivedTimestamp":"2026-11-21T19:05:00Z"}]}`

// What the apiserver stand-in knows of Sunset.
type sunsetState int

const (
	noAPIService sunsetState = iota
	// unavailable: the APIService exists, but Sunset does not answer.
	unavailable
	served
)

func startAPIServer(t *testing.T, token string, state sunsetState) *apiServer {
	t.Helper()
	s := &apiServer{}
	var sunset http.Handler
	if state == served {
		srv := testserver.Start(t, testserver.Config(t), app.Options{Now: func() time.Time { return testNow }})
		// The webhook answers once the count is committed.
		resp, err := http.Post(srv.URL+"/audit/webhook/master-0", "application/json", strings.NewReader(oneRequest))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		u, err := url.Parse(srv.URL)
		require.NoError(t, err)
		sunset = httputil.NewSingleHostReverseProxy(u)
	}
	// client-go sends a kubeconfig's credentials over TLS only.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.heard = append(s.heard, r.Header.Clone())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Authorization") != "Bearer "+token:
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
		case sunset != nil && strings.HasPrefix(r.URL.Path, "/apis/sunset.dev/v1/"):
			sunset.ServeHTTP(w, r)
		case state == unavailable && strings.HasPrefix(r.URL.Path, "/apis/sunset.dev/v1/"):
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server is currently unable to handle the request","reason":"ServiceUnavailable","code":503}`))
		default:
			// kube-apiserver v1.36's answer for a group nothing serves.
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	s.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	s.caFile = filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(s.caFile, s.ca, 0o600))
	return s
}

// lastHeard is the headers of the last request the server got.
func (s *apiServer) lastHeard(t *testing.T) http.Header {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.heard, "the server was never called")
	return s.heard[len(s.heard)-1]
}

// unreachable is an apiserver address where nothing listens.
var unreachable = &apiServer{url: "https://127.0.0.1:1"}

// kubeconfig writes a kubeconfig with one context per server, named
// after it, as `kind` writes them; current is the current context.
func kubeconfig(t *testing.T, path, current string, servers map[string]*apiServer, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for name, s := range servers {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: s.url, CertificateAuthorityData: s.ca}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.CurrentContext = current
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// environment is a process environment of only these variables.
func environment(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// list runs `report -o name` with the flags and returns what it printed
// and its error.
func list(f Flags, name string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	req := &cli.ListRequest{Filters: cli.Filters{Since: 24 * time.Hour}, Output: "name", Name: name}
	err = f.Run(req, cli.Output{Out: &out, Err: &errOut, Now: func() time.Time { return testNow }})
	return out.String(), errOut.String(), err
}

func TestKubeconfigOfTheEnvironmentIsTheDefault(t *testing.T) {
	s := startAPIServer(t, "kind-token", served)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	inHome := kubeconfig(t, filepath.Join(home, ".kube", "config"), "kind-x", map[string]*apiServer{"kind-x": s}, "kind-token")
	// KUBECONFIG is a list: files that do not exist are skipped, and
	// where two files set a value the first wins; each context is read
	// from the file that defines it.
	first := kubeconfig(t, filepath.Join(dir, "first"), "prod", map[string]*apiServer{"dev": s}, "kind-token")
	second := kubeconfig(t, filepath.Join(dir, "second"), "dev", map[string]*apiServer{"prod": s}, "kind-token")
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct {
		what string
		env  map[string]string
		says string
	}{
		{"~/.kube/config", map[string]string{"HOME": home},
			`Reading from cluster "kind-x" (context "kind-x" in ` + inHome + `) through kube-apiserver ` + s.url + ".\n"},
		{"KUBECONFIG over ~/.kube/config", map[string]string{"HOME": home, "KUBECONFIG": missing + string(filepath.ListSeparator) + first + string(filepath.ListSeparator) + second},
			`Reading from cluster "prod" (context "prod" in ` + second + `) through kube-apiserver ` + s.url + ".\n"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			out, errOut, err := list(Flags{Getenv: environment(tc.env)}, "")
			require.NoError(t, err)
			require.Equal(t, "apirequestcount.sunset.dev/cronjobs.v1beta1.batch\n", out)
			require.Equal(t, tc.says, errOut)
		})
	}
}

func TestWithoutAKubeconfigContextTheDefaultServer(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	noCurrent := kubeconfig(t, filepath.Join(dir, "no-current"), "", map[string]*apiServer{"kind-x": unreachable}, "t")
	for _, tc := range []struct {
		env  map[string]string
		says string
	}{
		{map[string]string{"HOME": home}, "Reading from Sunset at http://localhost:8080: no kubeconfig (KUBECONFIG is not set and " + filepath.Join(home, ".kube", "config") + " does not exist)."},
		{map[string]string{"HOME": home, "KUBECONFIG": "/nowhere/a:/nowhere/b"}, "Reading from Sunset at http://localhost:8080: no kubeconfig (KUBECONFIG=/nowhere/a:/nowhere/b names no file that exists)."},
		{nil, "Reading from Sunset at http://localhost:8080: no kubeconfig (neither KUBECONFIG nor HOME is set)."},
		{map[string]string{"KUBECONFIG": noCurrent}, "Reading from Sunset at http://localhost:8080: " + noCurrent + " has no current context (kubectl config use-context sets one, --context chooses one)."},
	} {
		f := Flags{Getenv: environment(tc.env)}
		c, err := f.choose()
		require.NoError(t, err)
		require.Equal(t, choice{server: DefaultServer, says: tc.says}, c)
	}
}

// A source a flag names is named on standard error only with -v: the
// user already knows it.
func TestNamedSourcesAreSaidWithV(t *testing.T) {
	s := startAPIServer(t, "sunset-token", served)
	dir := t.TempDir()
	other := startAPIServer(t, "kind-token", served)
	path := kubeconfig(t, filepath.Join(dir, "config"), "kind-x", map[string]*apiServer{"kind-x": other}, "kind-token")
	env := environment(map[string]string{"KUBECONFIG": path})
	for _, tc := range []struct {
		flags Flags
		says  string
	}{
		{Flags{Server: s.url, CAFile: s.caFile, Token: "sunset-token"}, "Reading from Sunset at " + s.url + " (--server).\n"},
		{Flags{Kubeconfig: path}, `Reading from cluster "kind-x" (context "kind-x" in ` + path + `) through kube-apiserver ` + other.url + ".\n"},
		{Flags{Context: "kind-x"}, `Reading from cluster "kind-x" (context "kind-x" in ` + path + `) through kube-apiserver ` + other.url + ".\n"},
	} {
		for _, v := range []int{0, 1} {
			tc.flags.Getenv, tc.flags.Verbosity = env, v
			out, errOut, err := list(tc.flags, "")
			require.NoError(t, err)
			require.Equal(t, "apirequestcount.sunset.dev/cronjobs.v1beta1.batch\n", out)
			if v == 0 {
				require.Empty(t, errOut)
			} else {
				require.Equal(t, tc.says, errOut)
			}
		}
	}
}

// --token, --certificate-authority, --as and --as-group override the
// kubeconfig as kubectl's flags do; as kubectl's plugin, so does --server.
func TestKubectlFlagsOverrideTheKubeconfig(t *testing.T) {
	s := startAPIServer(t, "admin-token", served)
	path := kubeconfig(t, filepath.Join(t.TempDir(), "config"), "kind-x", map[string]*apiServer{"kind-x": unreachable}, "stale-token")
	env := environment(map[string]string{"KUBECONFIG": path})

	out, errOut, err := list(Flags{Plugin: true, Server: s.url, CAFile: s.caFile, Token: "admin-token",
		As: "victor", AsGroups: []string{"auditors", "developers"}, Getenv: env}, "")
	require.NoError(t, err)
	require.Equal(t, "apirequestcount.sunset.dev/cronjobs.v1beta1.batch\n", out)
	require.Empty(t, errOut, "--server named the source")
	heard := s.lastHeard(t)
	require.Equal(t, "victor", heard.Get("Impersonate-User"))
	require.Equal(t, []string{"auditors", "developers"}, heard.Values("Impersonate-Group"))

	// With no kubeconfig at all, the plugin's --server is all there is.
	out, errOut, err = list(Flags{Plugin: true, Server: s.url, CAFile: s.caFile, Token: "admin-token", Verbosity: 1}, "")
	require.NoError(t, err)
	require.Equal(t, "apirequestcount.sunset.dev/cronjobs.v1beta1.batch\n", out)
	require.Equal(t, "Reading from kube-apiserver "+s.url+".\n", errOut)
}

// A cluster whose kube-apiserver has no APIService for sunset.dev answers
// 404, as Sunset does for an API it has no counts for: the error says
// which of the two it is.
func TestClusterWithoutSunset(t *testing.T) {
	bare := startAPIServer(t, "kind-token", noAPIService)
	withSunset := startAPIServer(t, "kind-token", served)
	dir := t.TempDir()
	path := kubeconfig(t, filepath.Join(dir, "config"), "bare", map[string]*apiServer{"bare": bare, "with-sunset": withSunset}, "kind-token")
	env := environment(map[string]string{"KUBECONFIG": path})

	wantErr := `cluster "bare" (context "bare" in ` + path + `) does not serve sunset.dev/v1: install Sunset's APIService there (docs/install.md), choose another context with --context, or read a Sunset directly with --server URL`
	for _, name := range []string{"", "endpoints.v1"} {
		_, _, err := list(Flags{Getenv: env}, name)
		require.EqualError(t, err, wantErr)
	}
	_, _, err := list(Flags{Getenv: env, Context: "with-sunset"}, "endpoints.v1")
	require.EqualError(t, err, "no deprecated requests to endpoints.v1 were recorded (names look like cronjobs.v1beta1.batch; `sunset report` lists them)")

	down := startAPIServer(t, "kind-token", unavailable)
	path = kubeconfig(t, filepath.Join(dir, "down"), "down", map[string]*apiServer{"down": down}, "kind-token")
	_, _, err = list(Flags{Kubeconfig: path}, "")
	require.EqualError(t, err, `cluster "down" (context "down" in `+path+`): server answered 503: the server is currently unable to handle the request`+
		" (`kubectl get apiservice v1.sunset.dev` says why Sunset is not available)")
}

func TestLoadingErrors(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken")
	require.NoError(t, os.WriteFile(broken, []byte("clusters: [what"), 0o600))
	noCurrent := kubeconfig(t, filepath.Join(dir, "no-current"), "", map[string]*apiServer{"kind-x": unreachable}, "t")
	for _, tc := range []struct {
		flags Flags
		err   string
	}{
		{Flags{Kubeconfig: filepath.Join(dir, "missing")}, "loading the kubeconfig: stat " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{Flags{Kubeconfig: noCurrent}, "loading the kubeconfig: " + noCurrent + " has no current context: choose one with --context"},
		{Flags{Kubeconfig: noCurrent, Context: "kind-y"}, `loading the kubeconfig: context "kind-y" does not exist`},
		{Flags{As: "bob"}, "--as, --as-group and --as-uid impersonate through kube-apiserver, and there is no kubeconfig to reach it: no kubeconfig (neither KUBECONFIG nor HOME is set)"},
		{Flags{Getenv: environment(map[string]string{"KUBECONFIG": broken})}, "loading the kubeconfig: error loading config file \"" + broken + "\": yaml: line 1: did not find expected ',' or ']'"},
	} {
		_, err := tc.flags.choose()
		require.EqualError(t, err, tc.err)
	}
}

// Every flag that cannot be meant is refused, all at once, before any
// server is asked.
func TestSourceFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		flags Flags
		err   string
	}{
		{Flags{Server: "http://127.0.0.1:1", Kubeconfig: "k"}, "give one of --server, --data-dir and --kubeconfig/--context"},
		{Flags{DataDir: "d", Context: "c", Token: "t"}, "give one of --server, --data-dir and --kubeconfig/--context\n" +
			"--token, --certificate-authority and --insecure-skip-tls-verify are for a server; --data-dir reads files"},
		{Flags{Plugin: true, DataDir: "d", Server: "https://127.0.0.1:6443"}, "give --data-dir or the kubeconfig flags (--kubeconfig, --context, --server), not both"},
		{Flags{Server: "http://127.0.0.1:1", As: "bob"}, "--as, --as-group and --as-uid impersonate through kube-apiserver: use them with a kubeconfig, not with --server or --data-dir"},
		{Flags{Plugin: true, Namespace: "ci", RequestTimeout: "0"}, `-n/--namespace "ci": Sunset's counts are cluster-wide (APIRequestCounts are not namespaced); leave it out (report --user system:serviceaccount:ci:NAME lists what one service account calls)` + "\n" +
			"--request-timeout 0: give a positive duration such as 30s or 5m"},
		{Flags{RequestTimeout: "soon"}, `--request-timeout "soon" is not a duration such as 30s or 5m`},
	} {
		_, _, err := list(tc.flags, "")
		require.EqualError(t, err, tc.err)
	}
}

func TestRequestTimeoutAsKubectlReadsIt(t *testing.T) {
	for in, want := range map[string]time.Duration{"": time.Minute, "5": 5 * time.Second, "90s": 90 * time.Second, "2m": 2 * time.Minute} {
		got, err := parseTimeout(in)
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
}

// The plugin's --server is kube-apiserver's: the kubeconfig's token is
// sent to it, as kubectl sends it.
func TestPluginServerKeepsTheKubeconfigCredentials(t *testing.T) {
	s := startAPIServer(t, "kind-token", served)
	// The kubeconfig's cluster, moved: its CA is the server's.
	path := kubeconfig(t, filepath.Join(t.TempDir(), "config"), "kind-x", map[string]*apiServer{"kind-x": {url: unreachable.url, ca: s.ca}}, "kind-token")
	out, _, err := list(Flags{Plugin: true, Server: s.url, Getenv: environment(map[string]string{"KUBECONFIG": path})}, "")
	require.NoError(t, err)
	require.Equal(t, "apirequestcount.sunset.dev/cronjobs.v1beta1.batch\n", out)
	require.Equal(t, "Bearer kind-token", s.lastHeard(t).Get("Authorization"))

	// Standalone, --server is a Sunset's, and nothing of the kubeconfig
	// goes to it.
	_, _, err = list(Flags{Server: s.url, CAFile: s.caFile, Getenv: environment(map[string]string{"KUBECONFIG": path})}, "")
	require.EqualError(t, err, "server answered 401: Unauthorized")
	require.Empty(t, s.lastHeard(t).Get("Authorization"))
}

func TestUnreachableAPIServer(t *testing.T) {
	path := kubeconfig(t, filepath.Join(t.TempDir(), "config"), "kind-x", map[string]*apiServer{"kind-x": unreachable}, "kind-token")
	_, _, err := list(Flags{Kubeconfig: path}, "")
	require.EqualError(t, err, `cannot reach kube-apiserver of cluster "kind-x" (context "kind-x" in `+path+`): `+
		`Get "https://127.0.0.1:1/apis/sunset.dev/v1/apirequestcounts?since=24h0m0s&users=100": dial tcp 127.0.0.1:1: connect: connection refused`)
}
