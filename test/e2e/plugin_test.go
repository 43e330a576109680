package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// `kubectl sunset` as a kubectl plugin: the real kubectl finds the built
// binary as kubectl-sunset on PATH and passes it the user's flags; it
// reads through the real kube-apiserver, with the user's kubeconfig from
// KUBECONFIG and its current context, Sunset's APIService. Before the
// APIService exists it says so; then `kubectl sunset check` gives the
// verdict, output and exit code of `sunset check --server` read directly,
// as the admin, as a reader impersonated with --as and --as-group, and is
// refused for mallory.
func TestKubectlSunsetPluginThroughKubeAPIServer(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	kubectl := kubectlBinary(t)
	kubectl, err := filepath.EvalSymlinks(kubectl)
	must(t, "resolving kubectl", err)

	p := newPKI(t)
	token := randomToken(t)
	port := freePort(t)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, "https://127.0.0.1:"+strconv.Itoa(port)+"/audit/webhook/"+clusterName+"/"+nodeName, token),
		frontProxyFlags(t)...)
	tr := prepare(t, a)
	ctx := ctxWithin(t, 5*time.Minute)

	// kubectl and the plugin alone on PATH; a home of the test's own.
	home := t.TempDir()
	path := filepath.Join(home, "bin")
	must(t, "creating the PATH directory", os.Mkdir(path, 0o755))
	must(t, "linking kubectl", os.Symlink(kubectl, filepath.Join(path, "kubectl")))
	must(t, "linking kubectl-sunset", os.Symlink(sunsetBin, filepath.Join(path, "kubectl-sunset")))
	admin := userKubeconfig(t, a, "admin", a.tokens["admin"])
	type result struct {
		stdout, stderr string
		code           int
	}
	kubectlSunset := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(filepath.Join(path, "kubectl"), append([]string{"sunset"}, args...)...)
		cmd.Env = []string{"PATH=" + path, "HOME=" + home, "KUBECONFIG=" + admin}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("kubectl sunset %v: %v", args, err)
		}
		return result{out.String(), errOut.String(), cmd.ProcessState.ExitCode()}
	}
	reading := `Reading from cluster "e2e" (context "admin@e2e" in ` + admin + `) through kube-apiserver ` + a.url

	// No APIService yet: kube-apiserver does not serve sunset.dev/v1.
	got := kubectlSunset("check", "--target-version", "1.37")
	if want := (result{"", reading + ".\nError: cluster \"e2e\" (context \"admin@e2e\" in " + admin + ") does not serve sunset.dev/v1: " +
		"install Sunset's APIService there (docs/install.md), choose another context with --context, or read a Sunset directly with --server URL\n", 1}); got != want {
		t.Fatalf("kubectl sunset check without the APIService:\n%+v\nwant\n%+v", got, want)
	}

	// Sunset behind the shipped APIService, as the aggregation test sets
	// it up.
	s := serveAggregated(ctx, t, a, tr.admin, p, sunsetBin, token, port)
	bindAuditorsToView(ctx, t, tr.admin)
	tr.round(ctx, 0)

	// The verdict read directly, once the round is counted, is the one
	// the plugin must give.
	var direct result
	waitFor(t, "Sunset to count the round", 2*time.Minute, func() error {
		cmd := exec.Command(sunsetBin, "check", "--target-version=1.37", "--server="+s.url, "--certificate-authority="+p.CAFile, "--token="+a.tokens["admin"])
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		_ = cmd.Run()
		direct = result{out.String(), errOut.String(), cmd.ProcessState.ExitCode()}
		if direct.code != 3 || !strings.Contains(direct.stdout, "storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass (3 requests in 24h by 1 client: carol)") {
			return fmt.Errorf("sunset check --server: %+v", direct)
		}
		return nil
	})
	if direct.stderr != "" {
		t.Errorf("sunset check --server, which names its source, said on stderr: %q", direct.stderr)
	}
	if got := kubectlSunset("check", "--target-version", "1.37"); got != (result{direct.stdout, reading + ".\n", 3}) {
		t.Errorf("kubectl sunset check: %+v, want the direct verdict", got)
	}
	if got := kubectlSunset("check", "--target-version", "1.37", "--as", "victor", "--as-group", "auditors"); got != (result{direct.stdout, reading + " as \"victor\".\n", 3}) {
		t.Errorf("kubectl sunset check --as victor --as-group auditors: %+v, want the direct verdict", got)
	}
	got = kubectlSunset("check", "--target-version", "1.37", "--as", "mallory")
	wantErr := reading + " as \"mallory\".\n" + `Error: server answered 403: apirequestcounts.sunset.dev is forbidden: User "mallory" cannot list resource "apirequestcounts" in API group "sunset.dev" at the cluster scope`
	if got.code != 1 || got.stdout != "" || !strings.HasPrefix(got.stderr, wantErr) {
		t.Errorf("kubectl sunset check --as mallory: %+v, want exit 1 and %q", got, wantErr)
	}
}
