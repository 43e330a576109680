package test

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
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
