package testserver_test

import (
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// A server answers on its URL until stopped, lets go of its data
// directory, and a second one opens it.
func TestStartStopAndStartAgainOnTheSameDataDir(t *testing.T) {
	cfg := testserver.Config(t)
	require.NotEmpty(t, cfg.DataDir)
	require.Equal(t, "127.0.0.1:0", cfg.Listen)

	first := testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t)})
	require.Regexp(t, `^http://127\.0\.0\.1:[0-9]+$`, first.URL)
	require.NotNil(t, first.Registry)
	requireStatus(t, first.URL+"/-/healthy", http.StatusOK)
	first.Stop()
	first.Stop() // a second call does nothing
	_, err := http.Get(first.URL + "/-/healthy")
	require.Error(t, err, "nothing listens once stopped")

	second := testserver.Start(t, first.Config, app.Options{Logger: testserver.Logger(t)})
	requireStatus(t, second.URL+"/-/healthy", http.StatusOK)
	// Left running: the test's cleanup stops it.
}

func requireStatus(t *testing.T, url string, want int) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, want, resp.StatusCode, url)
}

// A server built but never run lets go of its port and data directory
// when stopped, so that another opens the directory.
func TestNewWithoutRunIsClosedByStop(t *testing.T) {
	cfg := testserver.Config(t)
	idle := testserver.New(t, cfg, app.Options{})
	idle.Stop()
	_, err := net.DialTimeout("tcp", strings.TrimPrefix(idle.URL, "http://"), 5*time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "nothing listens once stopped")

	again := testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t)})
	requireStatus(t, again.URL+"/-/healthy", http.StatusOK)
}
