package test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/plugin/pkg/audit/webhook"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/internal/selfsigned"
	"github.com/kube-sunset/sunset/internal/testutil/testpki"
	"github.com/kube-sunset/sunset/scan"
)

const (
	kubernetesDir = "../deploy/kubernetes"
	controlPlane  = "../deploy/control-plane"
	manifestImage = "ghcr.io/kube-sunset/sunset"
)

// Every kustomization under deploy/ and exactly what it renders. The
// ConfigMap's generated hash suffix is written as <hash>.
var wantRendered = map[string][]string{
	"kubernetes/base":           slices.Sorted(slices.Values(slices.Concat(baseObjects, publisherObjects))),
	"kubernetes/overlays/tls":   baseObjects,
	"kubernetes/overlays/kafka": slices.Sorted(slices.Values(slices.Concat(baseObjects, publisherObjects))),
	"kubernetes/overlays/scan": slices.Sorted(slices.Values(slices.Concat(baseObjects, publisherObjects,
		[]string{"ClusterRole/sunset-scanner", "ClusterRoleBinding/sunset-scanner"}))),
}

// publisherObjects let Sunset publish the CA of its own certificate.
var publisherObjects = []string{"Role/sunset-ca-publisher", "RoleBinding/sunset-ca-publisher"}

var baseObjects = []string{
	"APIService/v1.sunset.dev",
	"ClusterRole/sunset:extension-apiserver-authentication-reader",
	"ClusterRole/sunset:reset",
	"ClusterRole/sunset:view",
	"ClusterRoleBinding/sunset:extension-apiserver-authentication-reader",
	"ClusterRoleBinding/sunset:system:auth-delegator",
	"ConfigMap/sunset-config-<hash>",
	"Namespace/sunset",
	"NetworkPolicy/sunset",
	"PrometheusRule/sunset",
	"Service/sunset",
	"ServiceAccount/sunset",
	"ServiceMonitor/sunset",
	"StatefulSet/sunset",
}

// clusterScoped are the kinds without a namespace.
var clusterScoped = []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "APIService"}

// What differs between the kustomizations.
type overlayWant struct {
	port     int32
	portName string
	scheme   corev1.URIScheme
	secrets  []string // Secrets referenced, none of them rendered
	args     []string
	// caSecret holds the ca.crt that Prometheus verifies Sunset with:
	// the one Sunset publishes, or the one of your own certificate.
	caSecret string
}

// Every kustomization serves HTTPS and demands a token per apiserver on
// the webhook: readers, Prometheus and kube-apiserver send credentials,
// and none travels in cleartext. The base serves a certificate Sunset
// makes and publishes the CA of; the TLS overlay serves yours.
var (
	baseArgs = []string{"--config=/etc/sunset/config/config.yaml", "--data-dir=/var/lib/sunset", "--listen=:8443",
		"--cert-dir=/var/lib/sunset/certs", "--cert-hosts=sunset.sunset.svc", "--publish-ca-secret=sunset/sunset-ca",
		"--webhook-token-auth-file=/etc/sunset/webhook/tokens.csv"}
	tlsArgs = []string{"--config=/etc/sunset/config/config.yaml", "--data-dir=/var/lib/sunset", "--listen=:8443",
		"--tls-cert-file=/etc/sunset/tls/tls.crt", "--tls-key-file=/etc/sunset/tls/tls.key", "--tls-client-ca-file=/etc/sunset/tls/ca.crt",
		"--webhook-token-auth-file=/etc/sunset/webhook/tokens.csv"}
)

var baseSecrets = []string{"sunset-webhook-tokens"}

var overlays = map[string]overlayWant{
	"kubernetes/base": {port: 8443, portName: "https", scheme: corev1.URISchemeHTTPS, secrets: baseSecrets, args: baseArgs, caSecret: "sunset-ca"},
	"kubernetes/overlays/tls": {port: 8443, portName: "https", scheme: corev1.URISchemeHTTPS,
		secrets: append([]string{"sunset-tls"}, baseSecrets...), args: tlsArgs, caSecret: "sunset-tls"},
	"kubernetes/overlays/kafka": {port: 8443, portName: "https", scheme: corev1.URISchemeHTTPS,
		secrets: append([]string{"sunset-kafka"}, baseSecrets...), args: baseArgs, caSecret: "sunset-ca"},
}

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

var configMapHash = regexp.MustCompile(`^(sunset-config)-[a-z0-9]{10}$`)

func TestKustomizeRendersExactObjects(t *testing.T) {
	kubectl(t)
	dirs := kustomizations(t)
	want := make([]string, 0, len(wantRendered))
	for d := range wantRendered {
		want = append(want, d)
	}
	sort.Strings(want)
	require.Equal(t, want, dirs, "every kustomization under deploy/ is listed in wantRendered")
	for _, dir := range dirs {
		r := render(t, dir)
		var got []string
		for _, obj := range r.raw {
			meta := obj["metadata"].(map[string]any)
			name := configMapHash.ReplaceAllString(meta["name"].(string), "$1-<hash>")
			got = append(got, fmt.Sprintf("%s/%s", obj["kind"], name))
			labels, _ := meta["labels"].(map[string]any)
			require.Equal(t, "sunset", labels["app.kubernetes.io/name"], "%s: %s/%s", dir, obj["kind"], name)
			require.Equal(t, "sunset", labels["app.kubernetes.io/part-of"], "%s: %s/%s", dir, obj["kind"], name)
			if !slices.Contains(clusterScoped, obj["kind"].(string)) {
				require.Equal(t, "sunset", meta["namespace"], "%s: %s/%s", dir, obj["kind"], name)
			}
			// Secrets are referenced, never shipped.
			require.NotEqual(t, "Secret", obj["kind"], "%s renders a Secret", dir)
			require.NotContains(t, obj, "stringData")
		}
		sort.Strings(got)
		require.Equal(t, wantRendered[dir], got, dir)
		require.Equal(t, "restricted", r.ns.Labels["pod-security.kubernetes.io/enforce"])
		require.Equal(t, ptrTo(true), r.sa.AutomountServiceAccountToken, "the token delegates readers' authentication")
	}
}

// Sunset's own grants are exactly what delegation needs, bound to its
// ServiceAccount, and, where it publishes the CA of its own certificate,
// what publishing takes on that one Secret, derived from the requests
// Sunset makes; readers get get/list through view, edit and admin, and
// reset through admin only.
func TestKustomizeGrantsOnlyDelegation(t *testing.T) {
	kubectl(t)
	for _, dir := range kustomizations(t) {
		requireOnlyNeededGrants(t, render(t, dir))
	}
}

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
	// The cluster scan, where it is on: list on what it lists.
	if scanInterval(t, r) != "" {
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
			require.Equal(t, struct{ Kind, Name, Namespace string }{"ServiceAccount", r.sa.Name, r.sa.Namespace}, b.Subjects[0], "%s: %s", dir, name)
			require.Equal(t, r.sts.Spec.Template.Spec.ServiceAccountName, r.sa.Name, dir)
			gotBindings = append(gotBindings, name)
		}
	}
	require.Equal(t, wantRoles, gotRoles, "%s: the Roles Sunset's requests need", dir)
	require.ElementsMatch(t, slices.Collect(maps.Keys(wantBindings)), gotBindings, "%s: bindings", dir)
}

// scanInterval is how often the rendered Sunset scans its cluster: the
// scan.interval of its config file or environment, "" when it does not.
func scanInterval(t *testing.T, r *rendered) string {
	t.Helper()
	interval := ""
	if s, ok := sunsetConfig(t, r)["scan"].(map[string]any); ok {
		interval, _ = s["interval"].(string)
	}
	for _, e := range r.sts.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "SUNSET_SCAN_INTERVAL" {
			interval = e.Value
		}
	}
	if d, err := time.ParseDuration(interval); err == nil && d == 0 {
		return ""
	}
	return interval
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

func requireHardened(t *testing.T, where string, pod *corev1.PodSecurityContext, c *corev1.SecurityContext) {
	t.Helper()
	require.NotNil(t, pod, where)
	require.Equal(t, ptrTo(true), pod.RunAsNonRoot, where)
	require.Equal(t, ptrTo(int64(65532)), pod.RunAsUser, where)
	require.Equal(t, ptrTo(int64(65532)), pod.RunAsGroup, where)
	require.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}, pod.SeccompProfile, where)
	require.NotNil(t, c, where)
	require.Equal(t, ptrTo(true), c.RunAsNonRoot, where)
	require.Equal(t, ptrTo(int64(65532)), c.RunAsUser, where)
	require.Equal(t, ptrTo(int64(65532)), c.RunAsGroup, where)
	require.Equal(t, ptrTo(false), c.AllowPrivilegeEscalation, where)
	require.Equal(t, ptrTo(true), c.ReadOnlyRootFilesystem, where)
	require.Nil(t, c.Privileged, where)
	require.Equal(t, &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, c.Capabilities, where)
	require.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}, c.SeccompProfile, where)
}

func ptrTo[T any](v T) *T { return &v }

// requireProbes checks the three probes: /-/ready for startup and
// readiness, /-/healthy for liveness, on the port Sunset listens on.
func requireProbes(t *testing.T, where string, c corev1.Container, port int32, scheme corev1.URIScheme, host string) {
	t.Helper()
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.StartupProbe, "/-/ready"}, {c.ReadinessProbe, "/-/ready"}, {c.LivenessProbe, "/-/healthy"}} {
		require.NotNil(t, p.probe, where)
		get := p.probe.HTTPGet
		require.NotNil(t, get, where)
		require.Equal(t, p.path, get.Path, where)
		require.Equal(t, scheme, get.Scheme, where)
		require.Equal(t, host, get.Host, where)
		if get.Port.Type == intstr.Int {
			require.Equal(t, port, get.Port.IntVal, where)
		} else {
			require.Equal(t, port, containerPort(t, c, get.Port).ContainerPort, where)
		}
	}
	// Restarts only after the startup probe's allowance for a badger
	// recovery; readiness reacts faster than liveness.
	require.GreaterOrEqual(t, c.StartupProbe.PeriodSeconds*c.StartupProbe.FailureThreshold, int32(120), where)
	require.Less(t, c.ReadinessProbe.PeriodSeconds*c.ReadinessProbe.FailureThreshold,
		c.LivenessProbe.PeriodSeconds*c.LivenessProbe.FailureThreshold, where)
}

// requireSized checks requests and limits against GOMEMLIMIT.
func requireSized(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	req, lim := c.Resources.Requests, c.Resources.Limits
	require.Equal(t, resource.MustParse("100m"), req[corev1.ResourceCPU], where)
	require.Equal(t, resource.MustParse("1"), lim[corev1.ResourceCPU], where)
	require.Equal(t, resource.MustParse("512Mi"), req[corev1.ResourceMemory], where)
	require.Equal(t, resource.MustParse("512Mi"), lim[corev1.ResourceMemory], where)
	var gomemlimit string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			gomemlimit = e.Value
		}
	}
	require.Equal(t, "300MiB", gomemlimit, where)
	memLimit := lim[corev1.ResourceMemory]
	require.Less(t, int64(400<<20), memLimit.Value(), where)
}

func TestKustomizeStatefulSet(t *testing.T) {
	kubectl(t)
	flags := serveFlags(t)
	for dir, want := range overlays {
		r := render(t, dir)
		sts := r.sts
		spec := sts.Spec.Template.Spec
		require.Equal(t, ptrTo(int32(1)), sts.Spec.Replicas, dir)
		require.Equal(t, "sunset", sts.Spec.ServiceName, dir)
		require.Equal(t, "sunset", spec.ServiceAccountName, dir)
		require.Equal(t, ptrTo(true), spec.AutomountServiceAccountToken, dir)
		require.Equal(t, ptrTo(int64(65532)), spec.SecurityContext.FSGroup, dir)
		require.Len(t, spec.Containers, 1, dir)
		require.Empty(t, spec.InitContainers, dir)
		c := spec.Containers[0]
		requireHardened(t, dir, spec.SecurityContext, c.SecurityContext)

		// The image and its tag, set once by images: in the base.
		require.Equal(t, manifestImage+":"+baseImageTag(t), c.Image, dir)

		// Exactly the expected arguments, each a real flag.
		require.Equal(t, want.args, c.Args, dir)
		require.Empty(t, c.Command, dir+": the image's entrypoint is `sunset serve`")
		args := requireRealFlags(t, flags, c.Args)
		port := listenPort(t, args["listen"])
		require.Equal(t, want.port, port, dir)
		// Webhook credentials bound to each apiserver, never batches
		// without, and only over TLS: kube-apiserver sends credentials
		// only to https:// URLs, and readers' tokens must not travel in
		// cleartext either.
		require.NotContains(t, args, "webhook-allow-unauthenticated", dir)
		require.NotContains(t, args, "allow-unauthenticated", dir)
		require.NotContains(t, args, "webhook-token-file", dir+": one token for every apiserver binds none")
		require.NotEmpty(t, args["webhook-token-auth-file"], dir)
		require.True(t, args["tls-cert-file"] != "" || args["cert-dir"] != "", "%s: HTTPS, with a certificate given or made", dir)
		require.Equal(t, args["tls-cert-file"] == "", args["tls-key-file"] == "", dir)
		require.Equal(t, []corev1.ContainerPort{{Name: want.portName, ContainerPort: want.port, Protocol: corev1.ProtocolTCP}}, c.Ports, dir)
		requireProbes(t, dir, c, port, want.scheme, "")
		requireSized(t, dir, c)

		// Above shutdown-timeout, with time to close badger.
		cfg := sunsetConfig(t, r)
		shutdown, err := time.ParseDuration(cfg["shutdown-timeout"].(string))
		require.NoError(t, err)
		require.NotNil(t, spec.TerminationGracePeriodSeconds)
		require.Greater(t, time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second, shutdown+10*time.Second, dir)
		// data-dir and listen are flags, beside the mount and port they
		// match; the file leaves them out.
		require.NotContains(t, cfg, "data-dir")
		require.NotContains(t, cfg, "listen")

		// Mounts: the PVC at the data dir, the ConfigMap holding --config,
		// each volume in a directory of its own.
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m
			for _, other := range c.VolumeMounts {
				if other.Name != m.Name {
					require.False(t, strings.HasPrefix(other.MountPath, m.MountPath+"/"), "%s: %s is mounted inside %s", dir, other.MountPath, m.MountPath)
				}
			}
		}
		require.Len(t, sts.Spec.VolumeClaimTemplates, 1, dir)
		pvc := sts.Spec.VolumeClaimTemplates[0]
		require.Equal(t, "data", pvc.Name)
		require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pvc.Spec.AccessModes)
		require.Equal(t, resource.MustParse("10Gi"), pvc.Spec.Resources.Requests[corev1.ResourceStorage])
		require.Equal(t, args["data-dir"], mounts["data"].MountPath, dir)
		require.False(t, mounts["data"].ReadOnly)
		require.Equal(t, args["config"], mounts["config"].MountPath+"/config.yaml", dir)
		require.True(t, mounts["config"].ReadOnly)
		volumes := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = v
			_, mounted := mounts[v.Name]
			require.True(t, mounted, "%s: volume %s is not mounted", dir, v.Name)
		}
		require.Equal(t, r.cm.Name, volumes["config"].ConfigMap.Name, dir)
		for name, m := range mounts {
			if name != "data" {
				require.Contains(t, volumes, name, dir)
				require.True(t, m.ReadOnly, "%s: %s", dir, name)
			}
		}

		// The Secrets it needs, and nothing else.
		var secrets []string
		for _, v := range spec.Volumes {
			if v.Secret != nil {
				secrets = append(secrets, v.Secret.SecretName)
				require.Equal(t, ptrTo(int32(0o440)), v.Secret.DefaultMode, dir)
			}
		}
		for _, e := range c.Env {
			require.True(t, e.Name == "GOMEMLIMIT" || strings.HasPrefix(e.Name, "SUNSET_"), dir)
			if e.ValueFrom != nil {
				require.NotNil(t, e.ValueFrom.SecretKeyRef, dir)
				secrets = append(secrets, e.ValueFrom.SecretKeyRef.Name)
			}
		}
		require.ElementsMatch(t, want.secrets, slices.Compact(slices.Sorted(slices.Values(secrets))), dir)

		// The Service, the NetworkPolicy and the ServiceMonitor follow the
		// container port.
		require.Len(t, r.svc.Spec.Ports, 1, dir)
		sp := r.svc.Spec.Ports[0]
		require.Equal(t, want.portName, sp.Name, dir)
		require.Equal(t, want.port, sp.Port, dir)
		require.Equal(t, want.port, containerPort(t, c, sp.TargetPort).ContainerPort, dir)
		require.Equal(t, corev1.ServiceTypeClusterIP, r.svc.Spec.Type)
		require.Equal(t, sts.Spec.Selector.MatchLabels, r.svc.Spec.Selector, dir)
		require.Equal(t, sts.Spec.Selector.MatchLabels, r.np.Spec.PodSelector.MatchLabels, dir)
		for k, v := range sts.Spec.Selector.MatchLabels {
			require.Equal(t, v, sts.Spec.Template.Labels[k], dir)
		}
		require.Len(t, r.smon.Spec.Endpoints, 1, dir)
		ep := r.smon.Spec.Endpoints[0]
		require.Equal(t, sp.Name, ep.Port, dir)
		require.Equal(t, "/metrics", ep.Path, dir)
		require.Equal(t, strings.ToLower(string(want.scheme)), ep.Scheme, dir)
		for k, v := range r.smon.Spec.Selector.MatchLabels {
			require.Equal(t, v, r.svc.Labels[k], dir)
		}
		// Prometheus's token goes over HTTPS only, to a certificate it
		// verifies with the serving CA under the Service's name.
		require.Equal(t, "https", ep.Scheme, dir)
		require.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount/token", ep.BearerTokenFile, dir)
		require.NotNil(t, ep.TLSConfig, dir)
		require.Equal(t, r.svc.Name+"."+r.svc.Namespace+".svc", ep.TLSConfig.ServerName, dir)
		require.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: want.caSecret}, Key: "ca.crt"}, ep.TLSConfig.CA.Secret, dir)
		if ref := args["publish-ca-secret"]; ref != "" {
			require.Equal(t, r.ns.Name+"/"+want.caSecret, ref, "%s: Prometheus trusts the CA Sunset publishes", dir)
			require.Equal(t, []string{ep.TLSConfig.ServerName}, strings.Split(args["cert-hosts"], ","), "%s: the certificate is for the name Prometheus verifies", dir)
		}
	}
}

// baseImageTag is the tag the base's images: sets.
func baseImageTag(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(kubernetesDir, "base/kustomization.yaml"))
	require.NoError(t, err)
	var k struct {
		Images []struct{ Name, NewTag string }
	}
	require.NoError(t, yaml.Unmarshal(raw, &k))
	require.Len(t, k.Images, 1)
	require.Equal(t, manifestImage, k.Images[0].Name)
	require.NotEmpty(t, k.Images[0].NewTag)
	return k.Images[0].NewTag
}

func TestKustomizeOverlays(t *testing.T) {
	kubectl(t)
	base := sunsetConfig(t, render(t, "kubernetes/base"))

	// Every file flag points into the Secret that holds it.
	flags := serveFlags(t)
	for dir := range overlays {
		r := render(t, dir)
		c := r.sts.Spec.Template.Spec.Containers[0]
		args := requireRealFlags(t, flags, c.Args)
		files := secretFiles(t, r.sts.Spec.Template.Spec, c)
		want := map[string]string{"webhook-token-auth-file": "sunset-webhook-tokens/tokens.csv"}
		if dir == "kubernetes/overlays/tls" {
			want["tls-cert-file"], want["tls-key-file"], want["tls-client-ca-file"] = "sunset-tls/tls.crt", "sunset-tls/tls.key", "sunset-tls/ca.crt"
		}
		got := map[string]string{}
		for name, path := range args {
			if strings.HasSuffix(name, "-file") {
				got[name] = files[path]
			}
		}
		// Sunset's own certificate is kept on the data volume, so that a
		// restart or a new node serves the same one.
		if dir != "kubernetes/overlays/tls" {
			require.Equal(t, args["data-dir"]+"/certs", args["cert-dir"], dir)
		}
		require.Equal(t, want, got, dir)
	}
	tlsR := render(t, "kubernetes/overlays/tls")
	require.Equal(t, base, sunsetConfig(t, tlsR), "the TLS overlay changes flags, not the config file")

	// Kafka: the base's config plus kafka keys; the password from the
	// Secret, the CA file from the Secret's mount, the brokers' port open.
	kafkaR := render(t, "kubernetes/overlays/kafka")
	cfg := sunsetConfig(t, kafkaR)
	kafkaCfg, ok := cfg["kafka"].(map[string]any)
	require.True(t, ok, "the kafka overlay's config has kafka keys")
	delete(cfg, "kafka")
	require.Equal(t, base, cfg, "overlays/kafka/config.yaml is the base's config.yaml plus kafka keys")
	require.NotContains(t, kafkaCfg["sasl"], "password", "the password comes from the Secret")
	require.NotEmpty(t, kafkaCfg["sasl"].(map[string]any)["username"])
	require.NotEmpty(t, kafkaCfg["topics"])
	require.Equal(t, "sunset", kafkaCfg["groupID"])
	c := kafkaR.sts.Spec.Template.Spec.Containers[0]
	var password *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "SUNSET_KAFKA_SASL_PASSWORD" {
			password = &c.Env[i]
		}
	}
	require.NotNil(t, password, "SUNSET_KAFKA_SASL_PASSWORD is set")
	require.Empty(t, password.Value)
	require.Equal(t, &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "sunset-kafka"}, Key: "password"}}, password.ValueFrom)
	files := secretFiles(t, kafkaR.sts.Spec.Template.Spec, c)
	tlsCfg := kafkaCfg["tls"].(map[string]any)
	require.Equal(t, true, tlsCfg["enabled"])
	require.Equal(t, "sunset-kafka/ca.crt", files[tlsCfg["caFile"].(string)])
}

// secretFiles maps each file path a container sees from a Secret volume to
// "secret/key".
func secretFiles(t *testing.T, spec corev1.PodSpec, c corev1.Container) map[string]string {
	t.Helper()
	keys := map[string]string{
		"sunset-tls":            "tls.crt tls.key ca.crt",
		"sunset-webhook-tokens": "tokens.csv",
		"sunset-kafka":          "password ca.crt",
	}
	out := map[string]string{}
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			continue
		}
		var mount string
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				mount = m.MountPath
			}
		}
		require.NotEmpty(t, mount, "secret volume %s is mounted", v.Name)
		require.Contains(t, keys, v.Secret.SecretName)
		if len(v.Secret.Items) > 0 {
			for _, it := range v.Secret.Items {
				out[mount+"/"+it.Path] = v.Secret.SecretName + "/" + it.Key
			}
			continue
		}
		for _, k := range strings.Fields(keys[v.Secret.SecretName]) {
			out[mount+"/"+k] = v.Secret.SecretName + "/" + k
		}
	}
	return out
}

// testPKI is a CA, a serving certificate for 127.0.0.1 and a client
// certificate with CN master-0, as PEM.
type testPKI struct {
	caPEM, certPEM, keyPEM, clientCertPEM, clientKeyPEM []byte
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	ca := testpki.NewCA(t, "sunset test CA")
	server := ca.Server(t, "127.0.0.1", "localhost", "sunset.sunset.svc")
	client := ca.Client(t, "master-0")
	return testPKI{caPEM: ca.PEM, certPEM: server.CertPEM, keyPEM: server.KeyPEM, clientCertPEM: client.CertPEM, clientKeyPEM: client.KeyPEM}
}

// localPod runs a pod's container here: each volume mount becomes a
// temporary directory (a ConfigMap's or Secret's files written into it),
// every mount path in the arguments and the config file is rewritten to
// it, and --listen to a free loopback port. It returns the arguments and
// the data directory, and sets the container's environment plus the
// image's own.
func localPod(t *testing.T, spec corev1.PodSpec, configMaps map[string]corev1.ConfigMap, secrets map[string]map[string][]byte) ([]string, string) {
	t.Helper()
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	dirs := map[string]string{} // mount path -> local directory
	var mountPaths []string
	for _, m := range c.VolumeMounts {
		dirs[m.MountPath] = t.TempDir()
		mountPaths = append(mountPaths, m.MountPath)
	}
	// Longest first, so no mount path rewrites part of a longer one.
	sort.Slice(mountPaths, func(i, j int) bool { return len(mountPaths[i]) > len(mountPaths[j]) })
	rewrite := func(s string) string {
		for _, mp := range mountPaths {
			s = strings.ReplaceAll(s, mp, dirs[mp])
		}
		return s
	}
	dataDir := ""
	for _, m := range c.VolumeMounts {
		dir := dirs[m.MountPath]
		v, ok := volumes[m.Name]
		switch {
		case !ok || v.HostPath != nil || v.EmptyDir != nil: // a volumeClaimTemplate or a host directory
			dataDir = dir
		case v.ConfigMap != nil:
			cm, ok := configMaps[v.ConfigMap.Name]
			require.True(t, ok, "ConfigMap %s is rendered", v.ConfigMap.Name)
			for k, data := range cm.Data {
				require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(rewrite(data)), 0o600))
			}
		case v.Secret != nil:
			data, ok := secrets[v.Secret.SecretName]
			require.True(t, ok, "the test knows Secret %s", v.Secret.SecretName)
			items := v.Secret.Items
			if len(items) == 0 {
				for k := range data {
					items = append(items, corev1.KeyToPath{Key: k, Path: k})
				}
			}
			for _, it := range items {
				require.Contains(t, data, it.Key, "Secret %s", v.Secret.SecretName)
				require.NoError(t, os.WriteFile(filepath.Join(dir, it.Path), data[it.Key], 0o600))
			}
		default:
			t.Fatalf("volume %s: the test does not know its kind", m.Name)
		}
	}
	var args []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--listen=") {
			a = "--listen=127.0.0.1:0"
		}
		args = append(args, rewrite(a))
	}
	// The image sets SUNSET_DATA_DIR; the container's --data-dir must win.
	imageDataDir := filepath.Join(t.TempDir(), "image-data-dir")
	t.Setenv("SUNSET_DATA_DIR", imageDataDir)
	t.Cleanup(func() {
		_, err := os.Stat(imageDataDir)
		require.True(t, os.IsNotExist(err), "Sunset used the image's SUNSET_DATA_DIR instead of --data-dir")
	})
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			t.Setenv(e.Name, e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			v, ok := secrets[e.ValueFrom.SecretKeyRef.Name][e.ValueFrom.SecretKeyRef.Key]
			require.True(t, ok, "the test knows %s/%s", e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
			t.Setenv(e.Name, string(v))
		default:
			t.Fatalf("env %s: the test does not know its source", e.Name)
		}
	}
	require.NotEmpty(t, dataDir, "a volume for the data directory")
	return args, dataDir
}

// probeClient talks to Sunset as kubelet's probes do: HTTPS without
// verifying the certificate, and no client certificate.
func probeClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

// requireStatus gets url and requires the answer want, returning the body.
// Callers ask only once the server said it is ready (startBinary waits for
// "sunset is serving", logged after Sunset turns ready) or once the write
// they check was answered, so there is nothing to wait for.
func requireStatus(t *testing.T, client *http.Client, url string, want int) string {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, want, resp.StatusCode, "%s: %s", url, body)
	return string(body)
}

// localRun is a rendered container running here: its base URL, and the
// CA that signed the certificate it serves.
type localRun struct {
	url   string
	caPEM []byte
}

// runRendered starts the binary as the rendered StatefulSet's container
// runs it and checks every probe against it, once the server has logged
// readyAfter when that is given. A certificate Sunset makes is kept in
// its cert dir, whose ca.crt clients then trust; with the certificate of
// a Secret, its ca.crt. There is no cluster here to publish a CA in, so
// --publish-ca-secret is left out.
func runRendered(t *testing.T, r *rendered, secrets map[string]map[string][]byte, readyAfter string) localRun {
	t.Helper()
	spec := r.sts.Spec.Template.Spec
	args, dataDir := localPod(t, spec, map[string]corev1.ConfigMap{r.cm.Name: r.cm}, secrets)
	args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--publish-ca-secret=") })
	p := startBinary(t, dataDir, args...)
	if readyAfter != "" {
		p.waitLogged(t, readyAfter, time.Minute)
	}
	run := localRun{url: p.url}
	for _, a := range args {
		if dir, ok := strings.CutPrefix(a, "--cert-dir="); ok {
			ca, err := os.ReadFile(filepath.Join(dir, selfsigned.CAFile))
			require.NoError(t, err, "Sunset keeps its CA in its cert dir")
			run.caPEM = ca
		}
		if strings.HasPrefix(a, "--tls-cert-file=") {
			run.caPEM = secrets["sunset-tls"]["ca.crt"]
		}
	}
	if run.caPEM != nil {
		run.url = "https://" + strings.TrimPrefix(run.url, "http://")
	}
	c := spec.Containers[0]
	for _, probe := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		requireStatus(t, probeClient(), run.url+probe.HTTPGet.Path, http.StatusOK)
	}
	return run
}

// baseSecrets' contents for a local run: a serving certificate for
// 127.0.0.1 and one webhook token, for cluster default's apiserver
// master-0 (the client certificate's common name).
func baseSecretData(pki testPKI) map[string]map[string][]byte {
	return map[string]map[string][]byte{
		"sunset-tls":            {"tls.crt": pki.certPEM, "tls.key": pki.keyPEM, "ca.crt": pki.caPEM},
		"sunset-webhook-tokens": {"tokens.csv": []byte("master-0-token,default/master-0,master-0\nmaster-1-token,default/master-1,master-1\n")},
	}
}

// webhookPoster posts a real kube-apiserver batch to Sunset over HTTPS,
// verifying its certificate, with the given client certificates and token,
// and returns the status.
func webhookPoster(t *testing.T, run localRun) func(path string, certs []tls.Certificate, token string) int {
	url := run.url
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(run.caPEM))
	body, err := os.ReadFile("../testdata/apiserver-v1.36/webhook-metadata-batch/00004.body")
	require.NoError(t, err)
	return func(path string, certs []tls.Certificate, token string) int {
		t.Helper()
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
		req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
}

// Sunset starts with exactly the base's arguments, config file and
// Secret, serves HTTPS with the certificate it made in its cert dir (a
// client that trusts that ca.crt verifies it), passes its probes without
// credentials, and takes a batch only with an apiserver's own token on
// that apiserver's path.
func TestKustomizeBaseConfigRunsInSunset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	kubectl(t)
	run := runRendered(t, render(t, "kubernetes/base"), baseSecretData(newTestPKI(t)), "")
	url := run.url
	require.True(t, strings.HasPrefix(url, "https://"), url)
	post := webhookPoster(t, run)
	require.Equal(t, http.StatusUnauthorized, post("/audit/webhook/default/master-0", nil, ""))
	require.Equal(t, http.StatusUnauthorized, post("/audit/webhook/default/master-0", nil, "not-a-token"))
	require.Equal(t, http.StatusForbidden, post("/audit/webhook/default/master-0", nil, "master-1-token"), "another apiserver's token")
	require.Equal(t, http.StatusOK, post("/audit/webhook/default/master-0", nil, "master-0-token"))

	// Plain HTTP on the same port gets no answer that a token could
	// follow: the listener speaks TLS only.
	plain := "http://" + strings.TrimPrefix(url, "https://")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(plain + "/-/ready")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "Go's TLS server answers plain HTTP with 400")
	}
}

// The TLS overlay adds webhook client certificates: the webhook demands an
// apiserver's token and a certificate from the CA, and the probes need
// neither.
func TestKustomizeTLSOverlayRunsInSunset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	kubectl(t)
	pki := newTestPKI(t)
	run := runRendered(t, render(t, "kubernetes/overlays/tls"), baseSecretData(pki), "")
	require.True(t, strings.HasPrefix(run.url, "https://"))
	require.Equal(t, pki.caPEM, run.caPEM, "the certificate of Secret sunset-tls")
	clientCert, err := tls.X509KeyPair(pki.clientCertPEM, pki.clientKeyPEM)
	require.NoError(t, err)
	post := webhookPoster(t, run)
	// The certificate names the node only, so the path names no cluster.
	const path = "/audit/webhook/master-0"
	require.Equal(t, http.StatusUnauthorized, post(path, nil, ""))
	require.Equal(t, http.StatusUnauthorized, post(path, nil, "master-0-token"))
	require.Equal(t, http.StatusUnauthorized, post(path, []tls.Certificate{clientCert}, ""))
	require.Equal(t, http.StatusOK, post(path, []tls.Certificate{clientCert}, "master-0-token"))
}

// The Kafka overlay's config, CA file and password from the environment
// get the consumer into its group on a broker with TLS and SCRAM.
func TestKustomizeKafkaOverlayRunsInSunset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	kubectl(t)
	r := render(t, "kubernetes/overlays/kafka")
	kafkaCfg := sunsetConfig(t, r)["kafka"].(map[string]any)
	sasl := kafkaCfg["sasl"].(map[string]any)
	var topics []string
	for _, tp := range kafkaCfg["topics"].([]any) {
		topics = append(topics, tp.(string))
	}
	pki := newTestPKI(t)
	serverCert, err := tls.X509KeyPair(pki.certPEM, pki.keyPEM)
	require.NoError(t, err)
	const password = "kafka-test-password"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser(strings.ToUpper(sasl["mechanism"].(string)), sasl["username"].(string), password))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	// The config's brokers are examples; the environment beats the file.
	t.Setenv("SUNSET_KAFKA_BROKERS", strings.Join(cluster.ListenAddrs(), ","))
	secrets := baseSecretData(pki)
	secrets["sunset-kafka"] = map[string][]byte{"ca.crt": pki.caPEM, "password": []byte(password)}
	runRendered(t, r, secrets, "joined consumer group")
}

// flagsFileFlags reads the --name=value lines of kube-apiserver-flags.txt.
func flagsFileFlags(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(controlPlane, "kube-apiserver-flags.txt"))
	require.NoError(t, err)
	flags := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		require.True(t, strings.HasPrefix(line, "--"), "line %q is neither a comment nor a flag", line)
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "--"), "=")
		require.True(t, ok, "flag %q: write --name=value", line)
		require.NotContains(t, flags, name, "--%s given twice", name)
		flags[name] = value
	}
	return flags
}

// kube-apiserver's audit webhook flags (k8s.io/apiserver
// pkg/server/options/audit.go) and how to check their values.
var apiserverAuditFlags = map[string]func(string) error{
	"audit-policy-file":                     absPath,
	"audit-webhook-config-file":             absPath,
	"audit-webhook-version":                 oneOf("audit.k8s.io/v1"),
	"audit-webhook-mode":                    oneOf("batch", "blocking", "blocking-strict"),
	"audit-webhook-batch-max-size":          positiveInt,
	"audit-webhook-batch-max-wait":          positiveDuration,
	"audit-webhook-batch-throttle-qps":      positiveFloat,
	"audit-webhook-batch-throttle-burst":    positiveInt,
	"audit-webhook-batch-buffer-size":       positiveInt,
	"audit-webhook-initial-backoff":         positiveDuration,
	"audit-webhook-truncate-enabled":        oneOf("true"),
	"audit-webhook-truncate-max-batch-size": positiveInt,
	"audit-webhook-truncate-max-event-size": positiveInt,
}

func absPath(s string) error {
	if !filepath.IsAbs(s) {
		return fmt.Errorf("%q is not an absolute path", s)
	}
	return nil
}

func oneOf(values ...string) func(string) error {
	return func(s string) error {
		if !slices.Contains(values, s) {
			return fmt.Errorf("%q is not one of %v", s, values)
		}
		return nil
	}
}

// positive checks that a flag's value parses and is above zero.
func positive[T int | float64 | time.Duration](parse func(string) (T, error)) func(string) error {
	return func(s string) error {
		v, err := parse(s)
		if err == nil && v <= 0 {
			err = fmt.Errorf("%v is not positive", v)
		}
		return err
	}
}

var (
	positiveInt      = positive(strconv.Atoi)
	positiveDuration = positive(time.ParseDuration)
	positiveFloat    = positive(func(s string) (float64, error) { return strconv.ParseFloat(s, 32) })
)

func TestDeployKubeAPIServerFlags(t *testing.T) {
	flags := flagsFileFlags(t)
	names := make([]string, 0, len(flags))
	for name, value := range flags {
		check, ok := apiserverAuditFlags[name]
		require.True(t, ok, "--%s is not a kube-apiserver audit flag this test knows", name)
		require.NoError(t, check(value), "--%s", name)
		names = append(names, name)
	}
	want := make([]string, 0, len(apiserverAuditFlags))
	for name := range apiserverAuditFlags {
		want = append(want, name)
	}
	require.ElementsMatch(t, want, names)
	require.Equal(t, "batch", flags["audit-webhook-mode"])
	require.Equal(t, "400", flags["audit-webhook-batch-max-size"])
	require.Equal(t, "5s", flags["audit-webhook-batch-max-wait"])
	// A batch kube-apiserver sends always fits the body limit of every
	// shipped Sunset: one caller's huge event is truncated or dropped
	// alone, never answered 413 with everyone else's in its batch.
	maxBatch, err := strconv.Atoi(flags["audit-webhook-truncate-max-batch-size"])
	require.NoError(t, err)
	for _, file := range []string{"control-plane/sunset-static-pod.yaml", "control-plane/sunset.service",
		"kubernetes/base/config.yaml", "kubernetes/overlays/kafka/config.yaml"} {
		raw, err := os.ReadFile(filepath.Join("../deploy", file))
		require.NoError(t, err)
		m := regexp.MustCompile(`max-body-bytes[=:] ?(\d+)`).FindSubmatch(raw)
		require.NotNil(t, m, "%s sets max-body-bytes", file)
		limit, err := strconv.Atoi(string(m[1]))
		require.NoError(t, err)
		require.Less(t, maxBatch, limit, "%s: a truncated batch must fit max-body-bytes", file)
	}

	// The names are kube-apiserver's own, as the vendored k8s.io/apiserver
	// declares them.
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/apiserver").Output()
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "pkg/server/options/audit.go"))
	require.NoError(t, err)
	for name := range apiserverAuditFlags {
		// Batch flags are declared per backend: "audit-%s-batch-max-size".
		perBackend := `"audit-%s-` + strings.TrimPrefix(name, "audit-webhook-") + `"`
		require.True(t, strings.Contains(string(src), `"`+name+`"`) || strings.Contains(string(src), perBackend),
			"k8s.io/apiserver declares --%s", name)
	}

	// The files the flags name are the shipped ones, under the directory
	// kube-apiserver-volumes.yaml mounts into the apiserver's pod.
	raw, err := os.ReadFile(filepath.Join(controlPlane, "kube-apiserver-volumes.yaml"))
	require.NoError(t, err)
	var pod corev1.Pod
	require.NoError(t, yaml.UnmarshalStrict(raw, &pod))
	require.Len(t, pod.Spec.Containers, 1)
	require.Equal(t, "kube-apiserver", pod.Spec.Containers[0].Name)
	require.Len(t, pod.Spec.Containers[0].VolumeMounts, 1)
	mount := pod.Spec.Containers[0].VolumeMounts[0]
	require.True(t, mount.ReadOnly)
	require.Len(t, pod.Spec.Volumes, 1)
	require.Equal(t, mount.Name, pod.Spec.Volumes[0].Name)
	require.Equal(t, mount.MountPath, pod.Spec.Volumes[0].HostPath.Path)
	require.Equal(t, filepath.Join(mount.MountPath, "audit-policy.yaml"), flags["audit-policy-file"])
	require.Equal(t, filepath.Join(mount.MountPath, "audit-webhook.kubeconfig"), flags["audit-webhook-config-file"])
	_, err = os.Stat(filepath.Join("../deploy", filepath.Base(flags["audit-policy-file"])))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(controlPlane, filepath.Base(flags["audit-webhook-config-file"])))
	require.NoError(t, err)
}

// staticPod decodes the control-plane static pod, strictly.
func staticPod(t *testing.T) corev1.Pod {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(controlPlane, "sunset-static-pod.yaml"))
	require.NoError(t, err)
	var pod corev1.Pod
	require.NoError(t, yaml.UnmarshalStrict(raw, &pod))
	return pod
}

// unitExecStart reads sunset.service's ExecStart arguments after `serve`,
// and its directives.
func unitFile(t *testing.T) ([]string, map[string][]string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(controlPlane, "sunset.service"))
	require.NoError(t, err)
	directives := map[string][]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "line %q", line)
		directives[k] = append(directives[k], v)
	}
	require.Len(t, directives["ExecStart"], 1)
	exec := strings.Fields(directives["ExecStart"][0])
	require.Equal(t, []string{"/usr/local/bin/sunset", "serve"}, exec[:2], "the image's binary path")
	return exec[2:], directives
}

func TestDeployControlPlaneStaticPod(t *testing.T) {
	flags := serveFlags(t)
	pod := staticPod(t)
	spec := pod.Spec
	require.Equal(t, "kube-system", pod.Namespace)
	require.True(t, spec.HostNetwork)
	require.Equal(t, "system-node-critical", spec.PriorityClassName)
	require.Equal(t, ptrTo(false), spec.AutomountServiceAccountToken)
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	requireHardened(t, "static pod", spec.SecurityContext, c.SecurityContext)
	require.Equal(t, manifestImage+":"+baseImageTag(t), c.Image, "the same release as the base")
	require.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
	args := requireRealFlags(t, flags, c.Args)
	host, port, err := net.SplitHostPort(args["listen"])
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host, "loopback only")
	requireProbes(t, "static pod", c, listenPort(t, args["listen"]), corev1.URISchemeHTTP, "127.0.0.1")
	requireSized(t, "static pod", c)
	shutdown, err := time.ParseDuration(args["shutdown-timeout"])
	require.NoError(t, err)
	require.Greater(t, time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second, shutdown+10*time.Second)
	require.Len(t, c.VolumeMounts, 1)
	require.Equal(t, args["data-dir"], c.VolumeMounts[0].MountPath)
	require.Len(t, spec.Volumes, 1)
	require.Equal(t, "/var/lib/sunset", spec.Volumes[0].HostPath.Path)
	require.Equal(t, ptrTo(corev1.HostPathDirectory), spec.Volumes[0].HostPath.Type, "created beforehand with the image user as owner")

	// The same max-body-bytes as the cluster install, which the memory
	// limit was measured with.
	raw, err := os.ReadFile(filepath.Join(kubernetesDir, "base/config.yaml"))
	require.NoError(t, err)
	var base struct {
		MaxBodyBytes int64 `json:"max-body-bytes"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &base))
	require.Equal(t, strconv.FormatInt(base.MaxBodyBytes, 10), args["max-body-bytes"])

	// The loopback kubeconfig points at this listen address, names the
	// cluster and node in the path, and loads in kube-apiserver's own code.
	kubeconfig := filepath.Join(controlPlane, "audit-webhook.kubeconfig")
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	require.Len(t, cfg.Clusters, 1)
	for _, cl := range cfg.Clusters {
		require.Equal(t, "http://127.0.0.1:"+port+"/audit/webhook/CLUSTER_NAME/NODE_NAME", cl.Server)
	}
	for _, u := range cfg.AuthInfos {
		require.Empty(t, u.Token, "kube-apiserver sends no credentials to http://")
	}
	_, err = webhook.NewBackend(kubeconfig, auditv1.SchemeGroupVersion, wait.Backoff{Duration: time.Second, Steps: 1}, nil)
	require.NoError(t, err)

	// The unit runs the same server.
	unitArgs, directives := unitFile(t)
	unit := requireRealFlags(t, flags, unitArgs)
	require.Equal(t, args["listen"], unit["listen"])
	require.Equal(t, args["max-body-bytes"], unit["max-body-bytes"])
	require.Equal(t, "/var/lib/"+directives["StateDirectory"][0], unit["data-dir"])
	for k, v := range map[string]string{
		"DynamicUser": "yes", "StateDirectory": "sunset", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
		"ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "",
		"RestrictSUIDSGID": "yes", "MemoryDenyWriteExecute": "yes", "IPAddressDeny": "any", "IPAddressAllow": "localhost",
		"Environment": "GOMEMLIMIT=300MiB", "MemoryMax": "512M", "Restart": "always",
	} {
		require.Equal(t, []string{v}, directives[k], k)
	}
	stop, err := time.ParseDuration(directives["TimeoutStopSec"][0] + "s")
	require.NoError(t, err)
	require.Greater(t, stop, 30*time.Second+10*time.Second, "TimeoutStopSec above shutdown-timeout")
}

// systemd itself accepts the unit: no unknown directive or bad value.
func TestDeployControlPlaneUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	raw, err := os.ReadFile(filepath.Join(controlPlane, "sunset.service"))
	require.NoError(t, err)
	// verify wants the binary to exist.
	unit := filepath.Join(t.TempDir(), "sunset.service")
	require.NoError(t, os.WriteFile(unit, bytes.ReplaceAll(raw, []byte("/usr/local/bin/sunset"), []byte(sunsetBin)), 0o644))
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Empty(t, strings.TrimSpace(string(out)))
}

// The static pod's and the unit's servers start as written, and
// kube-apiserver's webhook client, given the loopback kubeconfig, gets a
// batch counted under the cluster and node its path names.
func TestDeployControlPlaneRunsInSunset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	pod := staticPod(t)
	args, dataDir := localPod(t, pod.Spec, nil, nil)
	p := startBinary(t, dataDir, args...)
	for _, probe := range []*corev1.Probe{pod.Spec.Containers[0].StartupProbe, pod.Spec.Containers[0].LivenessProbe} {
		requireStatus(t, probeClient(), p.url+probe.HTTPGet.Path, http.StatusOK)
	}

	// The kubeconfig with the placeholders filled in as its comment says,
	// and this server's port.
	raw, err := os.ReadFile(filepath.Join(controlPlane, "audit-webhook.kubeconfig"))
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(p.url, "http://"))
	require.NoError(t, err)
	kc := strings.NewReplacer("CLUSTER_NAME", "prod", "NODE_NAME", "cp-1", "127.0.0.1:10280", "127.0.0.1:"+port).Replace(string(raw))
	kubeconfig := filepath.Join(t.TempDir(), "audit-webhook.kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(kc), 0o600))
	backend, err := webhook.NewBackend(kubeconfig, auditv1.SchemeGroupVersion, wait.Backoff{Duration: time.Second, Steps: 1}, nil)
	require.NoError(t, err)
	now := metav1.NewMicroTime(time.Now())
	require.True(t, backend.ProcessEvents(&auditinternal.Event{
		Level: auditinternal.LevelMetadata, AuditID: types.UID("static-pod-1"), Stage: auditinternal.StageResponseComplete,
		Verb: "list", User: authnv1.UserInfo{Username: "alice"}, UserAgent: "kubectl/v1.32.4",
		ObjectRef:                &auditinternal.ObjectReference{Resource: "endpoints", Namespace: "default", APIVersion: "v1"},
		ResponseStatus:           &metav1.Status{Code: 200},
		RequestReceivedTimestamp: now, StageTimestamp: now,
		Annotations: map[string]string{"k8s.io/deprecated": "true"},
	}))
	var count struct {
		Status struct {
			CurrentHour struct {
				ByNode []struct {
					NodeName, Cluster string
					RequestCount      int64
				}
			}
		}
	}
	body := requireStatus(t, probeClient(), p.url+"/apis/sunset.dev/v1/apirequestcounts/endpoints.v1", http.StatusOK)
	require.NoError(t, json.Unmarshal([]byte(body), &count))
	require.Len(t, count.Status.CurrentHour.ByNode, 1)
	require.Equal(t, "cp-1", count.Status.CurrentHour.ByNode[0].NodeName)
	require.Equal(t, "prod", count.Status.CurrentHour.ByNode[0].Cluster)
	require.Equal(t, int64(1), count.Status.CurrentHour.ByNode[0].RequestCount)

	// sunset.service's ExecStart, its data directory rewritten.
	unitArgs, _ := unitFile(t)
	unitDir := t.TempDir()
	for i, a := range unitArgs {
		if strings.HasPrefix(a, "--data-dir=") {
			unitArgs[i] = "--data-dir=" + unitDir
		}
		if strings.HasPrefix(a, "--listen=") {
			unitArgs[i] = "--listen=127.0.0.1:0"
		}
	}
	u := startBinary(t, unitDir, unitArgs...)
	requireStatus(t, probeClient(), u.url+"/-/ready", http.StatusOK)
}

// After a kubelet restart, kubelet adds KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT to the static pod (it does so for every pod once
// it has synced Services, whatever enableServiceLinks says). The static
// pod and the unit run the same with them as without: no token, no
// kubeconfig, the variables emptied by the pod's own env and unset by the
// unit, so Sunset still answers readers on loopback instead of 401.
func TestDeployControlPlaneSameAfterKubeletRestart(t *testing.T) {
	pod := staticPod(t)
	spec := pod.Spec
	require.Equal(t, ptrTo(false), spec.AutomountServiceAccountToken, "no service-account token")
	require.Equal(t, ptrTo(false), spec.EnableServiceLinks)
	require.Empty(t, spec.ServiceAccountName)
	require.Empty(t, spec.DeprecatedServiceAccount)
	for _, v := range spec.Volumes {
		require.Nil(t, v.Projected, "volume %s: a projected token or kubeconfig", v.Name)
		require.Nil(t, v.Secret, "volume %s", v.Name)
	}
	c := spec.Containers[0]
	flags := serveFlags(t)
	args := requireRealFlags(t, flags, c.Args)
	unitArgs, directives := unitFile(t)
	unit := requireRealFlags(t, flags, unitArgs)
	for _, k := range []string{"authentication-kubeconfig", "authorization-kubeconfig", "config"} {
		require.NotContains(t, args, k, "static pod")
		require.NotContains(t, unit, k, "unit")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		require.Nil(t, e.ValueFrom, e.Name)
		env[e.Name] = e.Value
	}
	require.Empty(t, c.EnvFrom)
	require.Equal(t, map[string]string{"GOMEMLIMIT": "300MiB", "KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""}, env)
	require.Equal(t, []string{"KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT"}, directives["UnsetEnvironment"])

	if testing.Short() {
		return
	}
	// What kubelet adds after a restart, then the container's own env, as
	// kubelet orders them.
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	runArgs, dataDir := localPod(t, spec, nil, nil)
	require.Empty(t, os.Getenv("KUBERNETES_SERVICE_HOST"))
	p := startBinary(t, dataDir, runArgs...)
	requireStatus(t, probeClient(), p.url+"/apis/sunset.dev/v1/apirequestcounts", http.StatusOK)
	requireStatus(t, probeClient(), p.url+"/metrics", http.StatusOK)
}
