// Package test holds tests that check Sunset as a whole: the shipped
// deployment files and the binary itself.
package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/plugin/pkg/audit/webhook"
	"sigs.k8s.io/yaml"

	"k8s.io/apiserver/pkg/audit/policy"
)

// The example files in deploy/ load with kube-apiserver's own loaders.
func TestDeployFilesLoadInKubeAPIServerCode(t *testing.T) {
	p, err := policy.LoadPolicyFromFile("../deploy/audit-policy.yaml")
	require.NoError(t, err)
	require.Len(t, p.Rules, 2)
	require.Equal(t, "RequestReceived", string(p.OmitStages[0]))

	p, err = policy.LoadPolicyFromFile("../deploy/audit-policy-fields.yaml")
	require.NoError(t, err)
	require.Len(t, p.Rules, 3)
	require.Equal(t, "Request", string(p.Rules[0].Level))
	require.Equal(t, []string{"nodes/status"}, p.Rules[0].Resources[0].Resources)

	_, err = webhook.NewBackend("../deploy/audit-webhook.kubeconfig", auditv1.SchemeGroupVersion,
		wait.Backoff{Duration: time.Second, Steps: 1}, nil)
	// The example CA file does not exist here; everything before reading it parsed.
	require.ErrorContains(t, err, "/etc/kubernetes/sunset/ca.crt")
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

func absPath(s string) error {
	if !filepath.IsAbs(s) {
		return fmt.Errorf("%q is not an absolute path", s)
	}
	return nil
}

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
