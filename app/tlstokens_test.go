package app_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

// Off loopback, every way of taking bearer tokens travels over TLS: the
// webhook's token files, the readers' token file and delegated
// authentication. Without tls-cert-file, Sunset serves a certificate of
// its own there; plain HTTP is for loopback only.
func TestBearerTokensTravelOnlyOverTLSOffLoopback(t *testing.T) {
	dir := t.TempDir()
	file := testpki.WriteFile(t, dir, "f", []byte("tok,user,uid\n"))
	kubeconfig := testpki.WriteFile(t, dir, "kubeconfig", []byte("apiVersion: v1\nkind: Config\n"))
	for _, tc := range []struct {
		name string
		set  func(*config.Config)
	}{
		{"webhook token", func(c *config.Config) { c.WebhookTokenFile, c.AllowUnauthenticated = file, true }},
		{"webhook token per apiserver", func(c *config.Config) { c.WebhookTokenAuthFile, c.AllowUnauthenticated = file, true }},
		{"reader tokens", func(c *config.Config) { c.TokenAuthFile, c.WebhookAllowUnauthenticated = file, true }},
		{"delegated", func(c *config.Config) {
			c.AuthenticationKubeconfig, c.AuthorizationKubeconfig, c.WebhookAllowUnauthenticated = kubeconfig, kubeconfig, true
		}},
		{"all of them", func(c *config.Config) {
			c.WebhookTokenFile, c.WebhookTokenAuthFile, c.TokenAuthFile, c.AuthenticationKubeconfig = file, file, file, kubeconfig
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Listen = "0.0.0.0:8080"
			tc.set(&cfg)
			require.NoError(t, errors.Join(cfg.Validate(), cfg.ValidateListen()))
			require.True(t, cfg.SelfSigned(), "a certificate of its own")
			require.True(t, cfg.ServesTLS())
			cfg.Listen = "127.0.0.1:8080"
			require.NoError(t, cfg.ValidateListen(), "loopback traffic never leaves the host")
			require.False(t, cfg.ServesTLS(), "plain HTTP on loopback")
			cfg.Listen = "0.0.0.0:8080"
			cfg.TLSCertFile, cfg.TLSKeyFile = file, file
			require.NoError(t, cfg.ValidateListen())
			require.False(t, cfg.SelfSigned(), "the certificate given")
			require.True(t, cfg.ServesTLS())
		})
	}

	// In a pod, delegation is on by itself: the mounted token says so.
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	cfg := testConfig(t).WithServiceAccountTokenFile(testpki.WriteFile(t, dir, "token", []byte("sa")))
	cfg.Listen, cfg.WebhookAllowUnauthenticated = ":"+strconv.Itoa(8080), true
	require.NoError(t, cfg.ValidateListen())
	require.True(t, cfg.ServesTLS())
}
