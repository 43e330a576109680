package connect

import (
	"crypto/tls"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// countedDataDir is the data directory of a Sunset that counted
// oneRequest and stopped.
func countedDataDir(t *testing.T) *testserver.Server {
	t.Helper()
	srv := testserver.Start(t, testserver.Config(t), app.Options{Now: func() time.Time { return testNow }})
	resp, err := http.Post(srv.URL+"/audit/webhook/master-0", "application/json", strings.NewReader(oneRequest))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return srv
}

// --data-dir reads the directory, whatever kubeconfig the environment
// has, and names it on standard error only with -v; a running server
// holds it, and the error says to ask that server instead.
func TestDataDirIsReadDirectly(t *testing.T) {
	srv := countedDataDir(t)
	dir := srv.Config.DataDir
	// A kubeconfig whose cluster nobody serves: were it used, the read
	// would fail.
	path := kubeconfig(t, filepath.Join(t.TempDir(), "config"), "kind-x", map[string]*apiServer{"kind-x": unreachable}, "t")
	env := environment(map[string]string{"KUBECONFIG": path})

	_, _, err := list(Flags{DataDir: dir, Getenv: env}, "")
	require.EqualError(t, err, "store: "+dir+" is in use by another Sunset process (badger holds its lock): "+
		`Cannot acquire directory lock on "`+dir+`": resource temporarily unavailable`+"\n"+
		"A running server holds the data directory: ask it instead with --server and the address it listens on (serve's --listen, http://localhost:8080 when not set)")
	// The server's config file names where it listens.
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("listen: 127.0.0.1:9191\n"), 0o600))
	_, _, err = list(Flags{DataDir: dir, ConfigFile: cfgFile, Getenv: env}, "")
	require.ErrorContains(t, err, "\nA running server holds the data directory: ask it instead with --server http://127.0.0.1:9191 (the listen address of "+
		cfgFile+", unless the server was started with another --listen)")

	srv.Stop()
	for _, v := range []int{0, 1} {
		out, errOut, err := list(Flags{DataDir: dir, Getenv: env, Verbosity: v}, "")
		require.NoError(t, err)
		require.Equal(t, "apirequestcount.sunset.dev/cronjobs.v1beta1.batch\n", out)
		if v == 0 {
			require.Empty(t, errOut)
		} else {
			require.Equal(t, "Reading data directory "+dir+" (--data-dir).\n", errOut)
		}
	}
}

// The source each combination of flags and environment chooses, and the
// sentence that names it.
func TestChooseSource(t *testing.T) {
	s := startAPIServer(t, "kind-token", noAPIService)
	dir := t.TempDir()
	path := kubeconfig(t, filepath.Join(dir, "config"), "kind-x", map[string]*apiServer{"kind-x": s, "kind-y": s}, "kind-token")
	home := filepath.Join(dir, "home")
	inHome := kubeconfig(t, filepath.Join(home, ".kube", "config"), "kind-y", map[string]*apiServer{"kind-y": s}, "kind-token")
	env := environment(map[string]string{"KUBECONFIG": path, "HOME": home})

	// A flag that names --data-dir or a standalone --server wins over
	// any kubeconfig.
	c, err := (&Flags{DataDir: "/var/lib/sunset", Getenv: env}).choose()
	require.NoError(t, err)
	require.Equal(t, choice{dataDir: "/var/lib/sunset", named: true, says: "Reading data directory /var/lib/sunset (--data-dir)."}, c)
	c, err = (&Flags{Server: "http://sunset:8080", Getenv: env}).choose()
	require.NoError(t, err)
	require.Equal(t, choice{server: "http://sunset:8080", named: true, says: "Reading from Sunset at http://sunset:8080 (--server)."}, c)

	for _, tc := range []struct {
		what  string
		flags Flags
		where string
		named bool
		says  string
	}{
		{"KUBECONFIG over HOME, its current context", Flags{Getenv: env},
			`cluster "kind-x" (context "kind-x" in ` + path + `)`, false,
			`Reading from cluster "kind-x" (context "kind-x" in ` + path + `) through kube-apiserver ` + s.url + "."},
		{"--context", Flags{Context: "kind-y", Getenv: env},
			`cluster "kind-y" (context "kind-y" in ` + path + `)`, true,
			`Reading from cluster "kind-y" (context "kind-y" in ` + path + `) through kube-apiserver ` + s.url + "."},
		{"~/.kube/config without KUBECONFIG", Flags{Getenv: environment(map[string]string{"HOME": home})},
			`cluster "kind-y" (context "kind-y" in ` + inHome + `)`, false,
			`Reading from cluster "kind-y" (context "kind-y" in ` + inHome + `) through kube-apiserver ` + s.url + "."},
		{"--kubeconfig over KUBECONFIG", Flags{Kubeconfig: inHome, Getenv: environment(map[string]string{"KUBECONFIG": path})},
			`cluster "kind-y" (context "kind-y" in ` + inHome + `)`, true,
			`Reading from cluster "kind-y" (context "kind-y" in ` + inHome + `) through kube-apiserver ` + s.url + "."},
		{"--as", Flags{As: "victor", AsGroups: []string{"auditors"}, Getenv: env},
			`cluster "kind-x" (context "kind-x" in ` + path + `)`, false,
			`Reading from cluster "kind-x" (context "kind-x" in ` + path + `) through kube-apiserver ` + s.url + ` as "victor".`},
	} {
		t.Run(tc.what, func(t *testing.T) {
			c, err := tc.flags.choose()
			require.NoError(t, err)
			require.NotNil(t, c.rest)
			require.Equal(t, s.url, c.rest.Host)
			require.Equal(t, "kind-token", c.rest.BearerToken)
			require.Equal(t, tc.flags.As, c.rest.Impersonate.UserName)
			require.Equal(t, tc.flags.AsGroups, c.rest.Impersonate.Groups)
			c.rest = nil
			require.Equal(t, choice{where: tc.where, named: tc.named, says: tc.says}, c)
		})
	}
}

// An unknown --context, a current context that names no context, a
// context without its cluster and a file that is not YAML are errors,
// from KUBECONFIG as from ~/.kube/config, before any server is asked;
// nothing is said on standard error.
func TestKubeconfigErrors(t *testing.T) {
	dir := t.TempDir()
	path := kubeconfig(t, filepath.Join(dir, "config"), "kind-x", map[string]*apiServer{"kind-x": unreachable}, "t")
	home := filepath.Join(dir, "home")
	kubeconfig(t, filepath.Join(home, ".kube", "config"), "kind-x", map[string]*apiServer{"kind-x": unreachable}, "t")
	dangling := kubeconfig(t, filepath.Join(dir, "dangling"), "gone", map[string]*apiServer{"kind-x": unreachable}, "t")
	broken := filepath.Join(dir, "broken")
	require.NoError(t, os.WriteFile(broken, []byte("clusters: [what"), 0o600))
	brokenHome := filepath.Join(dir, "broken-home")
	require.NoError(t, os.MkdirAll(filepath.Join(brokenHome, ".kube"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(brokenHome, ".kube", "config"), []byte("kind: [Config"), 0o600))

	for _, tc := range []struct {
		what  string
		flags Flags
		err   string
	}{
		{"unknown --context from KUBECONFIG", Flags{Context: "nope", Getenv: environment(map[string]string{"KUBECONFIG": path})},
			`loading the kubeconfig: context "nope" does not exist`},
		{"unknown --context from ~/.kube/config", Flags{Context: "nope", Getenv: environment(map[string]string{"HOME": home})},
			`loading the kubeconfig: context "nope" does not exist`},
		{"unknown --context without any kubeconfig", Flags{Context: "nope", Getenv: environment(map[string]string{"HOME": filepath.Join(dir, "nobody")})},
			`loading the kubeconfig: context "nope" does not exist`},
		{"current context that does not exist", Flags{Kubeconfig: dangling},
			"loading the kubeconfig: invalid configuration: [context was not found for specified context: gone, cluster has no server defined]"},
		{"broken --kubeconfig", Flags{Kubeconfig: broken},
			`loading the kubeconfig: error loading config file "` + broken + `": yaml: line 1: did not find expected ',' or ']'`},
		{"broken file after a good one in KUBECONFIG", Flags{Getenv: environment(map[string]string{"KUBECONFIG": path + string(filepath.ListSeparator) + broken})},
			`loading the kubeconfig: error loading config file "` + broken + `": yaml: line 1: did not find expected ',' or ']'`},
		{"broken ~/.kube/config", Flags{Getenv: environment(map[string]string{"HOME": brokenHome})},
			`loading the kubeconfig: error loading config file "` + filepath.Join(brokenHome, ".kube", "config") + `": yaml: line 1: did not find expected ',' or ']'`},
	} {
		t.Run(tc.what, func(t *testing.T) {
			out, errOut, err := list(tc.flags, "")
			require.EqualError(t, err, tc.err)
			require.Empty(t, out)
			require.Empty(t, errOut)
		})
	}
}

// KUBECONFIG is a list: empty entries and repeats are left out, in order;
// without it, ~/.kube/config; without HOME either, nothing.
func TestKubeconfigFiles(t *testing.T) {
	sep := string(filepath.ListSeparator)
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"KUBECONFIG": "/a" + sep + sep + "/b" + sep + "/a" + sep, "HOME": "/home/u"}, []string{"/a", "/b"}},
		{map[string]string{"HOME": "/home/u"}, []string{"/home/u/.kube/config"}},
		// USERPROFILE is Windows' HOME only.
		{map[string]string{"USERPROFILE": `C:\Users\u`}, nil},
		{nil, nil},
	} {
		require.Equal(t, tc.want, (&Flags{Getenv: environment(tc.env)}).kubeconfigFiles(), "%v", tc.env)
	}
}

// Client, what replay uses for --server: a standalone Sunset with
// --token and --certificate-authority, else kube-apiserver with the
// kubeconfig's credentials.
func TestClient(t *testing.T) {
	s := startAPIServer(t, "sunset-token", served)
	c, err := (&Flags{Server: s.url, CAFile: s.caFile, Token: "sunset-token"}).Client()
	require.NoError(t, err)
	l, err := c.List(sunsetv1.Query{Since: 24 * time.Hour})
	require.NoError(t, err)
	require.Len(t, l.Items, 1)
	require.Equal(t, "cronjobs.v1beta1.batch", l.Items[0].Metadata.Name)
	require.Equal(t, "Bearer sunset-token", s.lastHeard(t).Get("Authorization"))

	k := startAPIServer(t, "kind-token", served)
	path := kubeconfig(t, filepath.Join(t.TempDir(), "config"), "kind-x", map[string]*apiServer{"kind-x": k, "bare": unreachable}, "kind-token")
	c, err = (&Flags{Kubeconfig: path, Server: "http://ignored:1"}).Client()
	require.NoError(t, err)
	_, err = c.Get("cronjobs.v1beta1.batch", sunsetv1.Query{Since: 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, "Bearer kind-token", k.lastHeard(t).Get("Authorization"))

	// --context alone loads the kubeconfig as kubectl does: from the
	// process's KUBECONFIG (Flags.Getenv is not asked).
	t.Setenv("KUBECONFIG", path)
	c, err = (&Flags{Context: "kind-x"}).Client()
	require.NoError(t, err)
	_, err = c.Info()
	require.NoError(t, err)

	missingCA := filepath.Join(t.TempDir(), "ca.crt")
	for _, tc := range []struct {
		flags Flags
		err   string
	}{
		{Flags{Server: "localhost:8080"}, `--server "localhost:8080" is not an http:// or https:// URL`},
		{Flags{Server: "https://sunset", CAFile: missingCA}, "reading --certificate-authority: open " + missingCA + ": no such file or directory"},
		{Flags{Context: "nope"}, `loading the kubeconfig: context "nope" does not exist`},
		{Flags{Kubeconfig: "/nowhere/config"}, "loading the kubeconfig: stat /nowhere/config: no such file or directory"},
	} {
		_, err := tc.flags.Client()
		require.EqualError(t, err, tc.err)
	}
}

// hangingServer answers nothing until the client gives up, or, should
// the client wait that long, an empty list after 5 s: a timeout that was
// not applied then shows as no error at all rather than as a minute's wait.
func hangingServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		case <-time.After(5 * time.Second):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"APIRequestCountList","items":[]}`))
		}
	}))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(func() { close(release); srv.Close() })
	return srv
}

// --request-timeout bounds each answer, from a Sunset as from
// kube-apiserver, and the error says which was not reached.
func TestRequestTimeoutBoundsEachAnswer(t *testing.T) {
	srv := hangingServer(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(caFile, ca, 0o600))
	query := "/apis/sunset.dev/v1/apirequestcounts?since=24h0m0s&users=100"

	// After Sunset's words, the transport's: client-go's wrappers word a
	// timeout differently depending on where it struck.
	timedOut := func(err error, prefix string) {
		t.Helper()
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), prefix), err.Error())
		var ue *url.Error
		require.ErrorAs(t, err, &ue)
		require.True(t, ue.Timeout(), err.Error())
	}
	_, _, err := list(Flags{Server: srv.URL, CAFile: caFile, RequestTimeout: "100ms"}, "")
	timedOut(err, "cannot reach Sunset at "+srv.URL+" (is `sunset serve` running there? or read a data directory with --data-dir): "+
		`Get "`+srv.URL+query+`": `)

	path := kubeconfig(t, filepath.Join(t.TempDir(), "config"), "slow", map[string]*apiServer{"slow": {url: srv.URL, ca: ca}}, "t")
	_, _, err = list(Flags{Kubeconfig: path, RequestTimeout: "100ms"}, "")
	timedOut(err, `cannot reach kube-apiserver of cluster "slow" (context "slow" in `+path+`): `+`Get "`+srv.URL+query+`": `)
}

// The read commands' flags as kubectl spells them; -n only for the
// plugin, where it is refused later rather than unknown.
func TestReadFlags(t *testing.T) {
	var f Flags
	fs := pflag.NewFlagSet("report", pflag.ContinueOnError)
	f.AddReadFlags(fs)
	require.NoError(t, fs.Parse([]string{"-s", "http://sunset:8080", "--as", "victor", "--as-group", "a", "--as-group", "b", "--as-uid", "42",
		"-v", "2", "--context", "kind-x", "--kubeconfig", "/k", "--token", "t", "--certificate-authority", "/ca", "--insecure-skip-tls-verify"}))
	require.Equal(t, Flags{Server: "http://sunset:8080", As: "victor", AsGroups: []string{"a", "b"}, AsUID: "42", Verbosity: 2, Context: "kind-x",
		Kubeconfig: "/k", Token: "t", CAFile: "/ca", Insecure: true, RequestTimeout: "60s"}, f)
	require.EqualError(t, fs.Parse([]string{"-n", "ci"}), "unknown shorthand flag: 'n' in -n")

	plugin := Flags{Plugin: true}
	fs = pflag.NewFlagSet("kubectl-sunset", pflag.ContinueOnError)
	plugin.AddReadFlags(fs)
	require.NoError(t, fs.Parse([]string{"-n", "ci", "-s", "https://127.0.0.1:6443"}))
	require.Equal(t, "ci", plugin.Namespace)
	require.Equal(t, "https://127.0.0.1:6443", plugin.Server)
	require.True(t, fs.Lookup("namespace").Hidden)

	// replay's flags: no -s, no --as.
	var r Flags
	fs = pflag.NewFlagSet("replay", pflag.ContinueOnError)
	r.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--server", "http://sunset:8080", "--data-dir", "/d", "--config", "/c"}))
	require.Equal(t, Flags{Server: "http://sunset:8080", DataDir: "/d", ConfigFile: "/c"}, r)
	require.EqualError(t, fs.Parse([]string{"-s", "x"}), "unknown shorthand flag: 's' in -s")
	require.Nil(t, fs.Lookup("as"))
}

// --config names the server's configuration for --data-dir; without it,
// the defaults.
func TestConfig(t *testing.T) {
	cfg, err := (&Flags{}).Config()
	require.NoError(t, err)
	require.Equal(t, config.Default(), cfg)

	path := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(path, []byte("retention: 48h\n"), 0o600))
	cfg, err = (&Flags{ConfigFile: path}).Config()
	require.NoError(t, err)
	require.Equal(t, 48*time.Hour, cfg.Retention)
}
