package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Beyond loopback, serve refuses to start a webhook without credentials and
// says what to set.
func TestServeRefusesAnOpenWebhookBeyondLoopback(t *testing.T) {
	_, stderr, code := runCLI("serve", "--listen", ":0", "--data-dir", t.TempDir())
	require.Equal(t, 1, code)
	require.Equal(t, "Error: listen: :0 is not a loopback address and the webhook has no credentials, so anyone who reaches it could add counts: "+
		"set webhook-token-auth-file (a token per apiserver), webhook-token-file or tls-client-ca-file, or set webhook-allow-unauthenticated=true to accept that\n", stderr)
}
