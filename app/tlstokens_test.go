package app_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/testpki"
)

// Off loopback, every way of taking bearer tokens needs TLS: the webhook's
// token files, the readers' token file and delegated authentication.
func TestBearerTokensNeedTLSOffLoopback(t *testing.T) {
	dir := t.TempDir()
	file := testpki.WriteFile(t, dir, "f", []byte("tok,user,uid\n"))
	kubeconfig := testpki.WriteFile(t, dir, "kubeconfig", []byte("apiVersion: v1\nkind: Config\n"))
	advice := " would take bearer tokens in cleartext, where anyone on the path can copy them: " +
		"set tls-cert-file and tls-key-file to serve HTTPS (and use https:// in the webhook kubeconfig and for readers), or listen on 127.0.0.1"
	for _, tc := range []struct {
		name string
		set  func(*app.Config)
		want string
	}{
		{"webhook token", func(c *app.Config) { c.WebhookTokenFile, c.AllowUnauthenticated = file, true }, "webhook-token-file"},
		{"webhook token per apiserver", func(c *app.Config) { c.WebhookTokenAuthFile, c.AllowUnauthenticated = file, true }, "webhook-token-auth-file"},
		{"reader tokens", func(c *app.Config) { c.TokenAuthFile, c.WebhookAllowUnauthenticated = file, true }, "token-auth-file"},
		{"delegated", func(c *app.Config) {
			c.AuthenticationKubeconfig, c.AuthorizationKubeconfig, c.WebhookAllowUnauthenticated = kubeconfig, kubeconfig, true
		}, "authentication-kubeconfig"},
		{"all of them", func(c *app.Config) {
			c.WebhookTokenFile, c.WebhookTokenAuthFile, c.TokenAuthFile, c.AuthenticationKubeconfig = file, file, file, kubeconfig
		}, "webhook-token-file, webhook-token-auth-file, token-auth-file, authentication-kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Listen = "0.0.0.0:8080"
			tc.set(&cfg)
			require.EqualError(t, cfg.ValidateListen(), "listen: 0.0.0.0:8080 is not a loopback address and "+tc.want+advice)
			cfg.Listen = "127.0.0.1:8080"
			require.NoError(t, cfg.ValidateListen(), "loopback traffic never leaves the host")
			cfg.Listen = "0.0.0.0:8080"
			cfg.TLSCertFile, cfg.TLSKeyFile = file, file
			require.NoError(t, cfg.ValidateListen())
		})
	}

	// In a pod, delegation is on by itself: the mounted token says so.
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	cfg := testConfig(t).WithServiceAccountTokenFile(testpki.WriteFile(t, dir, "token", []byte("sa")))
	cfg.Listen, cfg.WebhookAllowUnauthenticated = ":"+strconv.Itoa(8080), true
	require.EqualError(t, cfg.ValidateListen(), "listen: :8080 is not a loopback address and in-cluster delegated authentication (a service-account token is mounted)"+advice)
}
