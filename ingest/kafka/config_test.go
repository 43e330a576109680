package kafka

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// SASL PLAIN sends the password as it is, so it needs TLS unless
// kafka.sasl.allowPlaintext says otherwise, and then a warning is logged.
// SCRAM never sends the password and needs neither.
func TestPlainNeedsTLSUnlessAllowed(t *testing.T) {
	const refused = "kafka.sasl.mechanism: plain without kafka.tls sends the password unencrypted; " +
		"enable kafka.tls (or use scram-sha-512), or set kafka.sasl.allowPlaintext for a test broker"
	base := Config{Brokers: []string{"kafka-0:9092"}, Topics: []string{"audit"}}
	for _, tc := range []struct {
		name      string
		tls       TLSConfig
		sasl      SASLConfig
		wantErr   string
		wantWarns int
	}{
		{"plain without tls", TLSConfig{}, SASLConfig{Mechanism: "plain", Username: "u"}, refused, 0},
		{"plain without tls, allowed", TLSConfig{}, SASLConfig{Mechanism: "plain", Username: "u", AllowPlaintext: true}, "", 1},
		{"plain over tls", TLSConfig{Enabled: true}, SASLConfig{Mechanism: "plain", Username: "u"}, "", 0},
		{"plain over tls, allowed anyway", TLSConfig{Enabled: true}, SASLConfig{Mechanism: "plain", Username: "u", AllowPlaintext: true}, "", 0},
		{"scram without tls", TLSConfig{}, SASLConfig{Mechanism: "scram-sha-512", Username: "u"}, "", 0},
		{"no sasl", TLSConfig{}, SASLConfig{}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.TLS, cfg.SASL = tc.tls, tc.sasl
			cfg = cfg.WithDefaults()
			err := cfg.Validate()
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			var out bytes.Buffer
			cfg.WarnInsecure(zerolog.New(&out))
			require.Equal(t, tc.wantWarns, strings.Count(out.String(), `"level":"warn"`), out.String())
			if tc.wantWarns > 0 {
				require.Contains(t, out.String(), "kafka.sasl.allowPlaintext: the SASL PLAIN password is sent to the brokers unencrypted")
				require.Contains(t, out.String(), `"brokers":["kafka-0:9092"]`)
			}
		})
	}
}
