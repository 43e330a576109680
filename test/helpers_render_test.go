package test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// rendered is one kustomization's output.
type rendered struct {
	dir  string
	raw  []map[string]any
	sts  appsv1.StatefulSet
	cm   corev1.ConfigMap
	svc  corev1.Service
	np   networkingv1.NetworkPolicy
	sa   corev1.ServiceAccount
	ns   corev1.Namespace
	smon serviceMonitor
}

type serviceMonitor struct {
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port            string `json:"port"`
			Path            string `json:"path"`
			Scheme          string `json:"scheme"`
			BearerTokenFile string `json:"bearerTokenFile"`
			TLSConfig       *struct {
				ServerName string `json:"serverName"`
				CA         struct {
					Secret *corev1.SecretKeySelector `json:"secret"`
				} `json:"ca"`
			} `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

func kubectl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is not on PATH: the kustomize tests render deploy/kubernetes with `kubectl kustomize` (install kubectl)")
	}
	return p
}

// kustomizations finds every kustomization.yaml under deploy/, as paths
// relative to deploy/.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	require.NoError(t, filepath.WalkDir("../deploy", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "kustomization.yaml" {
			rel, _ := filepath.Rel("../deploy", filepath.Dir(path))
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return err
	}))
	sort.Strings(dirs)
	return dirs
}

// render runs `kubectl kustomize` on deploy/<dir> and decodes every object,
// strictly: a field Kubernetes does not know fails the test.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	return decodeRendered(t, dir, kustomize(t, filepath.Join("../deploy", dir)))
}

// kustomize runs `kubectl kustomize` on path.
func kustomize(t *testing.T, path string) []byte {
	t.Helper()
	out, err := exec.Command(kubectl(t), "kustomize", path).CombinedOutput()
	require.NoError(t, err, "kubectl kustomize %s:\n%s", path, out)
	return out
}

// decodeRendered decodes a stream of YAML documents (kustomize's or
// Helm's output), strictly for the kinds the tests read.
func decodeRendered(t *testing.T, dir string, out []byte) *rendered {
	t.Helper()
	r := &rendered{dir: dir}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &obj))
		r.raw = append(r.raw, obj)
		kind, _ := obj["kind"].(string)
		strict := map[string]any{
			"StatefulSet": &r.sts, "ConfigMap": &r.cm, "Service": &r.svc,
			"NetworkPolicy": &r.np, "ServiceAccount": &r.sa, "Namespace": &r.ns,
		}
		into := strict[kind]
		if isScanner(obj) {
			// The cluster scan's own objects (its ServiceAccount,
			// NetworkPolicy, ConfigMap) are not Sunset's: the scan tests
			// read them from raw.
			into = nil
		}
		if kind == "ServiceMonitor" {
			// serviceMonitor holds only the fields the tests read: not strict.
			require.NoError(t, yaml.Unmarshal(doc, &r.smon))
		}
		if into != nil {
			require.NoError(t, yaml.UnmarshalStrict(doc, into), "%s: %s", dir, kind)
		}
	}
	return r
}

// isScanner reports whether obj belongs to the cluster scan's own workload
// (deploy/kubernetes/overlays/scan, the chart's scan.enabled).
func isScanner(obj map[string]any) bool {
	meta, _ := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	return labels["app.kubernetes.io/component"] == "cluster-scan"
}

// serveFlags are the flags `sunset serve --help` of the built binary lists.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(sunsetBin, "serve", "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	require.True(t, flags["listen"] && flags["data-dir"] && flags["config"], "parsed %v from:\n%s", flags, out)
	return flags
}

// requireRealFlags checks that every --flag is one `sunset serve` has, given
// as --name=value, and returns the values by name.
func requireRealFlags(t *testing.T, flags map[string]bool, args []string) map[string]string {
	t.Helper()
	values := map[string]string{}
	for _, a := range args {
		require.True(t, strings.HasPrefix(a, "--"), "argument %q is not a flag", a)
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		require.True(t, ok, "flag %q: write --name=value", a)
		require.True(t, flags[name], "--%s is not a flag of `sunset serve`", name)
		require.NotContains(t, values, name, "--%s given twice", name)
		values[name] = value
	}
	return values
}

func listenPort(t *testing.T, listen string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(listen)
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return int32(n)
}

// containerPort resolves a probe or Service port, by name or number.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) corev1.ContainerPort {
	t.Helper()
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp
		}
	}
	t.Fatalf("port %s is not a port of container %s", p.String(), c.Name)
	return corev1.ContainerPort{}
}

// sunsetConfig is the config file the ConfigMap carries.
func sunsetConfig(t *testing.T, r *rendered) map[string]any {
	t.Helper()
	require.Contains(t, r.cm.Data, "config.yaml")
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.cm.Data["config.yaml"]), &cfg))
	return cfg
}

func ptrTo[T any](v T) *T { return &v }

// scanInterval is how often the rendered Sunset scans its cluster in its
// own pod: the scan.interval of its config file or environment, "" when it
// does not. No shipped install does: the scan runs in its own workload.
func scanInterval(t *testing.T, r *rendered) string {
	t.Helper()
	interval := ""
	if s, ok := sunsetConfig(t, r)["scan"].(map[string]any); ok {
		interval, _ = s["interval"].(string)
	}
	if v, ok := stsEnv(r, "SUNSET_SCAN_INTERVAL"); ok {
		interval = v
	}
	if d, err := time.ParseDuration(interval); err == nil && d == 0 {
		return ""
	}
	return interval
}

// stsEnv is the value of Sunset's container's environment variable name.
func stsEnv(r *rendered, name string) (string, bool) {
	for _, e := range r.sts.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}
