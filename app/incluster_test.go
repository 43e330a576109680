package app_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// kubelet injects KUBERNETES_SERVICE_HOST and _PORT into static pods too,
// once it has synced Services, as after a restart. Without a mounted
// service-account token Sunset behaves as without a cluster (here: open on
// loopback); with one, it delegates to the cluster, and a caller without
// credentials gets 401.
func TestServiceVariablesWithoutATokenAreNoCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "1")
	dir := t.TempDir()
	one := "/apis/sunset.dev/v1/apirequestcounts"

	cfg := testConfig(t).WithServiceAccountTokenFile(filepath.Join(dir, "token"))
	s := start(t, cfg)
	for _, path := range []string{one, "/metrics"} {
		code, body := call(t, s, http.MethodGet, path, "", "", nil)
		require.Equal(t, 200, code, "%s: %s", path, body)
	}
	s.stop()

	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("a service-account token"), 0o600))
	s = start(t, cfg)
	for _, path := range []string{one, "/metrics"} {
		code, body := call(t, s, http.MethodGet, path, "", "", nil)
		require.Equal(t, 401, code, "%s: %s", path, body)
	}
	code, _ := call(t, s, http.MethodGet, "/-/ready", "", "", nil)
	require.Equal(t, 200, code, "probes stay open")
}
