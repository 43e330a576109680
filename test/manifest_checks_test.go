// The checks of rendered manifests that more than one subject's tests
// apply: the kustomizations, the Helm chart and the control-plane run all
// hold Sunset's pod to the same hardening, probes, sizes, grants and
// egress, and run it locally the same way.

package test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/selfsigned"
	"github.com/kube-sunset/sunset/scan"
)

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

// destination is somewhere the pod must reach: an address, or nil for a
// name (a Kafka broker, the cluster's resolver), which only a rule open to
// every address admits, since a NetworkPolicy cannot match names.
type destination struct {
	what     string
	ip       net.IP
	protocol corev1.Protocol
	port     int32
}

// egressAdmits is NetworkPolicy's egress decision for a policy that
// selects the pod and has Egress among its policy types: some rule admits
// both the destination and its port.
func egressAdmits(np networkingv1.NetworkPolicy, d destination) bool {
	return slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
		return peerAdmits(r.To, d.ip) && portAdmits(r.Ports, d.protocol, d.port)
	})
}

// requiredEgress is every destination the rendered kustomization's own
// configuration needs: the resolver, for broker names; kube-apiserver on
// the endpoint ports of the kubernetes Service (443, and kubeadm's 6443)
// at the control-plane addresses, when Sunset delegates to it; and each
// Kafka broker of the config file.
func requiredEgress(t *testing.T, r *rendered) []destination {
	t.Helper()
	out := []destination{
		{what: "DNS over UDP", protocol: corev1.ProtocolUDP, port: 53},
		{what: "DNS over TCP", protocol: corev1.ProtocolTCP, port: 53},
	}
	if delegates(t, r) {
		for _, cidr := range controlPlaneCIDRs(t, r.np) {
			ip, _, err := net.ParseCIDR(cidr)
			require.NoError(t, err)
			for _, port := range []int32{443, 6443} {
				out = append(out, destination{what: "kube-apiserver at " + cidr, ip: ip, protocol: corev1.ProtocolTCP, port: port})
			}
		}
	}
	return append(out, brokers(t, r)...)
}

// wantEgressRules are the egress rules the needs make, in the order the
// manifests write them: DNS, kube-apiserver, then the brokers' ports.
func wantEgressRules(t *testing.T, r *rendered) []networkingv1.NetworkPolicyEgressRule {
	t.Helper()
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(n int32) *intstr.IntOrString { p := intstr.FromInt32(n); return &p }
	rules := []networkingv1.NetworkPolicyEgressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: port(53)}, {Protocol: &tcp, Port: port(53)}},
	}}
	if delegates(t, r) {
		var to []networkingv1.NetworkPolicyPeer
		for _, cidr := range controlPlaneCIDRs(t, r.np) {
			to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
		}
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: port(443)}, {Protocol: &tcp, Port: port(6443)}},
			To:    to,
		})
	}
	var brokerPorts []int32
	for _, b := range brokers(t, r) {
		require.Nil(t, b.ip, "%s: the shipped brokers are names", r.dir)
		brokerPorts = append(brokerPorts, b.port)
	}
	for _, p := range slices.Compact(slices.Sorted(slices.Values(brokerPorts))) {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: port(p)}}})
	}
	return rules
}
