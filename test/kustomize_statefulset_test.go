package test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

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
