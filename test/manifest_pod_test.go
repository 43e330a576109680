// The checks of rendered manifests that more than one subject's tests
// apply, in the manifest_*_test.go files: the kustomizations, the Helm
// chart and the control-plane run all hold Sunset's pod to the same
// hardening, probes and sizes (this file), grants (manifest_grants_test.go)
// and egress (manifest_egress_test.go), and run it locally the same way
// (manifest_local_test.go).

package test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

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
