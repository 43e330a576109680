package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

func TestPluginArgs(t *testing.T) {
	for _, tc := range []struct {
		argv0      string
		plugin     bool
		args, want []string
	}{
		{"/usr/local/bin/sunset", false, []string{"report"}, []string{"report"}},
		{"/home/u/.krew/bin/kubectl-sunset", true, []string{"check", "--context", "prod"}, []string{"check", "--context", "prod"}},
		{"kubectl-sunset.exe", true, []string{"report"}, []string{"report"}},
		{"/usr/local/bin/kubectl_complete-sunset", true, []string{"rep"}, []string{"__complete", "rep"}},
		{"/usr/local/bin/kubectl-sunset-old", false, []string{"report"}, []string{"report"}},
	} {
		plugin, args := pluginArgs(tc.argv0, tc.args)
		require.Equal(t, tc.plugin, plugin, tc.argv0)
		require.Equal(t, tc.want, args, tc.argv0)
	}
}

// runAs runs the command line as the binary does when started as a
// kubectl plugin (plugin) or as sunset, in an environment of env only.
func runAs(plugin bool, env map[string]string, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), console{stdout: &out, stderr: &errOut, stdin: strings.NewReader(""), now: func() time.Time { return testNow },
		plugin: plugin, getenv: func(name string) string { return env[name] }}, args)
	return out.String(), errOut.String(), code
}

// usage is the usage line and the examples of a command's help.
func usage(t *testing.T, help string) []string {
	t.Helper()
	var lines []string
	section := ""
	for _, line := range strings.Split(help, "\n") {
		switch {
		case line == "Usage:" || line == "Examples:" || line == "Flags:":
			section = line
		case line == "":
			section = ""
		case section == "Usage:" || section == "Examples:":
			lines = append(lines, line)
		}
	}
	return lines
}

func TestPluginHelpSaysKubectlSunset(t *testing.T) {
	out, _, code := runAs(true, nil, "check", "--help")
	require.Equal(t, 0, code)
	require.Equal(t, []string{
		"  kubectl sunset check --target-version 1.NN [flags]",
		"  kubectl sunset check --target-version 1.37",
		"  kubectl sunset check --target-version 1.37 --warnings-as-errors --since 168h -o json",
	}, usage(t, out))
	require.Regexp(t, `\n  -s, --server string +the address of kube-apiserver, instead of the\s+kubeconfig's \(as kubectl's --server\)\n`, out)
	require.NotContains(t, out, "--namespace", "-n is accepted only to be refused with why")

	out, _, code = runAs(false, nil, "check", "--help")
	require.Equal(t, 0, code)
	require.Equal(t, []string{
		"  sunset check --target-version 1.NN [flags]",
		"  sunset check --target-version 1.37",
		"  sunset check --target-version 1.37 --warnings-as-errors --since 168h -o json",
	}, usage(t, out))

	_, errOut, code := runAs(true, nil, "report", "-n", "kube-system")
	require.Equal(t, 1, code)
	require.Equal(t, `Error: -n/--namespace "kube-system": Sunset's counts are cluster-wide (APIRequestCounts are not namespaced); leave it out (report --user system:serviceaccount:kube-system:NAME lists what one service account calls)`+"\n", errOut)
	_, errOut, code = runAs(false, nil, "report", "-n", "kube-system")
	require.Equal(t, 1, code)
	require.Equal(t, "Error: unknown shorthand flag: 'n' in -n\n", errOut)
}

// Sunset's --cluster and --user keep their meaning as a plugin (filters
// of the counts), where kubectl's would name a kubeconfig cluster or
// user: the fixture's prod cluster alone, read as kubectl sunset.
func TestPluginKeepsSunsetsClusterAndUserFilters(t *testing.T) {
	url, _, _ := fixture(t)
	kubeconfig := writeKubeconfig(t, url)
	env := map[string]string{"KUBECONFIG": kubeconfig}
	out, errOut, code := runAs(true, env, "report", "-o", "name", "--cluster", "prod", "--exclude-system=false", "--since", "48h")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "apirequestcount.sunset.dev/cronjobs.v1beta1.batch\n", out)
	require.Equal(t, `Reading from cluster "test" (context "test" in `+kubeconfig+`) through kube-apiserver `+url+".\n", errOut)
	out, _, code = runAs(true, env, "report", "-o", "name", "--user", "carol", "--since", "48h")
	require.Equal(t, 0, code)
	require.Equal(t, "apirequestcount.sunset.dev/volumeattributesclasses.v1beta1.storage.k8s.io\n", out)
}

// writeKubeconfig writes a kubeconfig whose current context, "test",
// reaches server.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// The real kubectl finds the built binary through a kubectl-sunset link on
// PATH, lists it as a plugin, completes it through a
// kubectl_complete-sunset link, and runs `kubectl sunset check` with the
// user's flags and kubeconfig. The kubeconfig's cluster is a Sunset, which
// serves the paths kube-apiserver's APIService serves.
func TestKubectlRunsTheBinaryAsPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is not on PATH: this test runs `kubectl sunset` (install kubectl)")
	}
	kubectl, err = filepath.EvalSymlinks(kubectl)
	require.NoError(t, err)
	dir := t.TempDir()
	bin := filepath.Join(dir, "build", "sunset")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	// PATH holds kubectl and the links only, so that no other plugin of
	// this machine is listed.
	path := filepath.Join(dir, "path")
	require.NoError(t, os.Mkdir(path, 0o755))
	for link, target := range map[string]string{"kubectl": kubectl, "kubectl-sunset": bin, "kubectl_complete-sunset": bin} {
		require.NoError(t, os.Symlink(target, filepath.Join(path, link)))
	}

	// A Sunset that has counted one request, just now, to an API 1.37
	// removes.
	now := time.Now()
	srv := testserver.Start(t, testserver.Config(t), app.Options{})
	resp, err := http.Post(srv.URL+"/audit/webhook/master-0", "application/json", strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[
		{"auditID":"vac-1","stage":"ResponseComplete","verb":"get","user":{"username":"carol"},"userAgent":"terraform/1.9.0","objectRef":{"resource":"volumeattributesclasses","apiGroup":"storage.k8s.io","apiVersion":"v1beta1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"`+now.UTC().Format(time.RFC3339)+`","annotations":{"k8s.io/deprecated":"true","k8s.io/removed-release":"1.37"}}]}`))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	kubeconfig := writeKubeconfig(t, srv.URL)

	kubectlRun := func(env []string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(path, "kubectl"), args...)
		cmd.Env = append([]string{"PATH=" + path, "HOME=" + dir}, env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return o.String(), e.String(), exit.ExitCode()
		}
		require.NoError(t, err, "kubectl %v", args)
		return o.String(), e.String(), 0
	}

	stdout, stderr, code := kubectlRun(nil, "plugin", "list")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "The following compatible plugins are available:\n\n"+filepath.Join(path, "kubectl-sunset")+"\n", stdout)

	stdout, stderr, code = kubectlRun([]string{"KUBECONFIG=" + kubeconfig}, "sunset", "check", "--target-version", "1.37")
	require.Equal(t, 3, code, stderr)
	require.Equal(t, "Warning: storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass (1 request in 24h by 1 client: carol)\n"+
		"NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 24h, system users excluded.\n", stdout)
	require.Equal(t, `Reading from cluster "test" (context "test" in `+kubeconfig+`) through kube-apiserver `+srv.URL+".\n", stderr)

	// kubectl's flags, as kubectl passes them on: --kubeconfig names
	// the source, so nothing is said of it; a context that does not
	// exist is an error.
	stdout, stderr, code = kubectlRun(nil, "sunset", "report", "-o", "name", "--kubeconfig", kubeconfig)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "apirequestcount.sunset.dev/volumeattributesclasses.v1beta1.storage.k8s.io\n", stdout)
	require.Empty(t, stderr)
	_, stderr, code = kubectlRun([]string{"KUBECONFIG=" + kubeconfig}, "sunset", "report", "--context", "prod")
	require.Equal(t, 1, code)
	require.Equal(t, "Error: loading the kubeconfig: context \"prod\" does not exist\n", stderr)

	stdout, _, code = kubectlRun(nil, "sunset", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "Usage:\n  kubectl sunset [command]\n")

	stdout, _, code = kubectlRun(nil, "__complete", "sunset", "rep")
	require.Equal(t, 0, code)
	require.Equal(t, "replay\tImport audit log files (JSON lines, gzip, directories, - for stdin)\n"+
		"report\tShow which deprecated APIs are called, how often and by whom\n:4\n", stdout)
}
