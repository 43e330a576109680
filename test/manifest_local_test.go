package test

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

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
