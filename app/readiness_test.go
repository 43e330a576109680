package app_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/testpki"
)

// An unauthenticated probe learns only that Sunset is not ready and the
// reason code. The detail, which names brokers and their error text, goes
// to the log and to a caller who may scrape /metrics, with ?verbose.
func TestReadinessDetailOnlyForReaders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	broker := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now: connection refused

	cfg := testConfig(t)
	kafkaConfig(&cfg, []string{broker}, "audit", "readiness")
	cfg.TokenAuthFile = testpki.WriteFile(t, t.TempDir(), "readers.csv", []byte(
		"reader-token,alice,1001,\"sunset:readers\"\nother-token,mallory,1002,\"dev\"\n"))
	logs := newLogLines(t)
	s := startLogging(t, cfg, zerolog.New(logs).Level(zerolog.InfoLevel))
	var body string
	s.await(30*time.Second, func() bool {
		_, body = call(t, s, http.MethodGet, "/-/ready?verbose", "", "reader-token", nil)
		return strings.Contains(body, "connection refused")
	})
	require.True(t, strings.HasPrefix(body, "Sunset is not ready: kafka: "), body)
	require.Contains(t, body, broker)

	for _, tc := range []struct{ path, token string }{
		{"/-/ready", ""}, {"/-/ready?verbose", ""}, {"/readyz?verbose", ""}, {"/-/ready?verbose", "other-token"}, {"/-/ready?verbose", "wrong"}, {"/-/ready", "reader-token"},
	} {
		code, got := call(t, s, http.MethodGet, tc.path, "", tc.token, nil)
		require.Equal(t, 503, code, "%+v", tc)
		require.Equal(t, "Sunset is not ready: kafka\n", got, "%+v", tc)
	}
	require.GreaterOrEqual(t, logs.count("not ready"), 1, "the detail is logged")
}
