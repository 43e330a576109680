package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kube-sunset/sunset/internal/selfsigned"
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
	"kubernetes/overlays/scan":  slices.Sorted(slices.Values(slices.Concat(baseObjects, publisherObjects, scannerObjects))),
	"kubernetes/overlays/gate":  slices.Sorted(slices.Values(slices.Concat(baseObjects, publisherObjects, gateObjectNames))),
}

// gateObjectNames are the upgrade gate's: kube-apiserver's webhook and
// Cluster API's runtime extension. The gate needs no grant of its own.
var gateObjectNames = []string{"ExtensionConfig/sunset-gate", "ValidatingWebhookConfiguration/sunset-gate"}

// scannerObjects are the cluster scan's own workload, its grants and the
// ConfigMap it publishes in, and Sunset's read of that ConfigMap.
var scannerObjects = []string{
	"ClusterRole/sunset-scanner", "ClusterRoleBinding/sunset-scanner",
	"ConfigMap/sunset-cluster-scan", "CronJob/sunset-scanner", "NetworkPolicy/sunset-scanner", "ServiceAccount/sunset-scanner",
	"Role/sunset-scan-publisher", "RoleBinding/sunset-scan-publisher", "Role/sunset-scan-reader", "RoleBinding/sunset-scan-reader",
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
var clusterScoped = []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "APIService", "ValidatingWebhookConfiguration", "ExtensionConfig"}

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
	gateOverlay: {port: 8443, portName: "https", scheme: corev1.URISchemeHTTPS, secrets: baseSecrets, args: baseArgs, caSecret: "sunset-ca"},
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

var (
	positiveInt      = positive(strconv.Atoi)
	positiveDuration = positive(time.ParseDuration)
	positiveFloat    = positive(func(s string) (float64, error) { return strconv.ParseFloat(s, 32) })
)
