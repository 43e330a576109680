package test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/plugin/pkg/audit/webhook"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

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
