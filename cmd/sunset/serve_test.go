package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/config"
)

// Beyond loopback, serve refuses to start a webhook without credentials and
// says what to set.
func TestServeRefusesAnOpenWebhookBeyondLoopback(t *testing.T) {
	_, stderr, code := runCLI("serve", "--listen", ":0", "--data-dir", t.TempDir())
	require.Equal(t, 1, code)
	require.Equal(t, "Error: listen: :0 is not a loopback address and the webhook has no credentials, so anyone who reaches it could add counts: "+
		"set webhook-token-auth-file (a token per apiserver), webhook-token-file or tls-client-ca-file, or set webhook-allow-unauthenticated=true to accept that\n"+
		"listen: :0 is reachable from other machines, but nothing authenticates API readers: set authentication-kubeconfig and authorization-kubeconfig (in a pod the in-cluster config is used), token-auth-file or client-ca-file, or set allow-unauthenticated=true to let anyone who reaches the port read and reset\n", stderr)
}

// Readers of a data directory take the server's config file for its catalog
// and users; its listen address is no concern of theirs.
func TestReadersIgnoreTheServersListenAddress(t *testing.T) {
	_, dataDir, stop := startServer(t, testNow, t.TempDir())
	stop()
	cfgFile := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("listen: :8080\n"), 0o600))
	_, stderr, code := runCLI("report", "--data-dir", dataDir, "--config", cfgFile)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "No deprecated API requests in the last 24h.\n", stderr)
	_, stderr, code = runCLI("serve", "--config", cfgFile, "--data-dir", dataDir)
	require.Equal(t, 1, code)
	require.True(t, strings.HasPrefix(stderr, "Error: listen: :8080 is not a loopback address"), stderr)
}

// The example file of docs/configuration.md is one serve starts with: it
// passes every check serve makes of a configuration before it opens
// anything, once the files it names exist.
func TestConfigurationExampleStarts(t *testing.T) {
	page, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(page), "An example file")
	require.True(t, ok)
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	require.True(t, ok)
	example, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	cfgFile := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(example), 0o600))
	cfg, err := config.Load(config.Flags(), cfgFile)
	// Only the files it names are missing here.
	require.EqualError(t, err,
		"tls-cert-file: cannot read /etc/sunset/tls.crt: no such file or directory\n"+
			"tls-key-file: cannot read /etc/sunset/tls.key: no such file or directory\n"+
			"webhook-token-auth-file: cannot read /etc/sunset/webhook-tokens.csv: no such file or directory\n"+
			"token-auth-file: cannot read /etc/sunset/reader-tokens.csv: no such file or directory")
	require.NoError(t, cfg.ValidateListen())
}
