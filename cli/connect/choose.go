package connect

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/cli"
	"github.com/kube-sunset/sunset/client"
)

// choice is the source the flags choose, and the sentence that names it.
type choice struct {
	dataDir string
	// server is a Sunset's URL, read directly.
	server string
	// rest reaches Sunset through kube-apiserver; where names that route
	// in errors.
	rest  *rest.Config
	where string
	// named is set when a flag chose the source: the user knows which it
	// is, so saying it is left to -v.
	named bool
	says  string
}

// choose picks the source: --data-dir, a standalone --server, else the
// kubeconfig as kubectl loads it, else DefaultServer.
func (f *Flags) choose() (choice, error) {
	switch {
	case f.DataDir != "":
		return choice{dataDir: f.DataDir, named: true, says: fmt.Sprintf("Reading data directory %s (--data-dir).", f.DataDir)}, nil
	case f.Server != "" && !f.Plugin:
		return choice{server: f.Server, named: true, says: fmt.Sprintf("Reading from Sunset at %s (--server).", f.Server)}, nil
	}
	files := f.kubeconfigFiles()
	// client-go's loading rules, with the files this environment names:
	// --kubeconfig alone, else KUBECONFIG's list merged (the first file
	// that sets a value wins), else ~/.kube/config.
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: f.Kubeconfig, Precedence: files}
	raw, err := rules.Load()
	if err != nil {
		return choice{}, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	contextName := cmp.Or(f.Context, raw.CurrentContext)
	serverGiven := f.Plugin && f.Server != ""
	if contextName == "" && !serverGiven {
		if f.Kubeconfig != "" {
			return choice{}, fmt.Errorf("loading the kubeconfig: %s has no current context: choose one with --context", f.Kubeconfig)
		}
		if f.As != "" || len(f.AsGroups) > 0 || f.AsUID != "" {
			return choice{}, fmt.Errorf("--as, --as-group and --as-uid impersonate through kube-apiserver, and there is no kubeconfig to reach it: %s", f.noKubeconfig(files))
		}
		return choice{server: DefaultServer, says: fmt.Sprintf("Reading from Sunset at %s: %s.", DefaultServer, f.noKubeconfig(files))}, nil
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.Context}
	overrides.AuthInfo.Token = f.Token
	overrides.AuthInfo.Impersonate = f.As
	overrides.AuthInfo.ImpersonateGroups = f.AsGroups
	overrides.AuthInfo.ImpersonateUID = f.AsUID
	overrides.ClusterInfo.CertificateAuthority = f.CAFile
	overrides.ClusterInfo.InsecureSkipTLSVerify = f.Insecure
	if serverGiven {
		overrides.ClusterInfo.Server = f.Server
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, overrides).ClientConfig()
	if err != nil {
		return choice{}, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	where := "kube-apiserver " + cfg.Host
	if kctx := raw.Contexts[contextName]; kctx != nil {
		where = fmt.Sprintf("cluster %q (context %q in %s)", kctx.Cluster, contextName, kctx.LocationOfOrigin)
	}
	says := "Reading from " + where
	if strings.HasPrefix(where, "cluster") {
		says += " through kube-apiserver " + cfg.Host
	}
	if f.As != "" {
		says += fmt.Sprintf(" as %q", f.As)
	}
	return choice{rest: cfg, where: where, named: f.Kubeconfig != "" || f.Context != "" || serverGiven, says: says + "."}, nil
}

// kubeconfigFiles are the files kubectl would read: KUBECONFIG's list,
// else ~/.kube/config.
func (f *Flags) kubeconfigFiles() []string {
	if list := f.getenv("KUBECONFIG"); list != "" {
		var files []string
		for _, file := range filepath.SplitList(list) {
			if file != "" && !slices.Contains(files, file) {
				files = append(files, file)
			}
		}
		return files
	}
	home := f.getenv("HOME")
	if home == "" && runtime.GOOS == "windows" {
		home = f.getenv("USERPROFILE")
	}
	if home == "" {
		return nil
	}
	return []string{filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
}

// noKubeconfig says why no kubeconfig context was found.
func (f *Flags) noKubeconfig(files []string) string {
	var found []string
	for _, file := range files {
		if _, err := os.Stat(file); err == nil {
			found = append(found, file)
		}
	}
	switch {
	case len(found) > 0:
		return fmt.Sprintf("%s has no current context (kubectl config use-context sets one, --context chooses one)", strings.Join(found, ", "))
	case f.getenv("KUBECONFIG") != "":
		return fmt.Sprintf("no kubeconfig (KUBECONFIG=%s names no file that exists)", f.getenv("KUBECONFIG"))
	case len(files) == 0:
		return "no kubeconfig (neither KUBECONFIG nor HOME is set)"
	}
	return fmt.Sprintf("no kubeconfig (KUBECONFIG is not set and %s does not exist)", files[0])
}

func (f *Flags) getenv(name string) string {
	if f.Getenv == nil {
		return ""
	}
	return f.Getenv(name)
}

// open opens the chosen source and returns a function that releases it.
func (c choice) open(f *Flags, timeout time.Duration, now func() time.Time) (cli.Reader, func(), error) {
	if c.dataDir != "" {
		return f.openDataDir(now)
	}
	if c.rest != nil {
		cl, err := client.New(client.Options{REST: c.rest, Timeout: timeout})
		if err != nil {
			return nil, nil, err
		}
		return kubeReader{cl, c.where}, func() {}, nil
	}
	cl, err := client.New(client.Options{Server: c.server, CAFile: f.CAFile, Token: f.Token, InsecureSkipVerify: f.Insecure, Timeout: timeout})
	if err != nil {
		return nil, nil, err
	}
	return cl, func() {}, nil
}
