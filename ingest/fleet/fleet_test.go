package fleet

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// counterStore is the real store behind the aggregator; the counter reads
// only its cursors, and the outbox (the forwarder's) stays empty.
type counterStore struct{ *ingesttest.Counter }

func (counterStore) ScanCursors(string, int, func(string, []byte) error) error { return nil }
func (counterStore) CountCursors(string) (int, error)                          { return 0, nil }
func (counterStore) DeleteCursors(...string) error                             { return nil }

// Every role warns, once, when the SASL PLAIN password goes to the
// brokers unencrypted: the counter and the forwarder without the filter,
// whose consumer warns for all of them.
func TestEveryRoleWarnsOfPlaintextSASL(t *testing.T) {
	off := false
	sasl := kafka.SASLConfig{Mechanism: "plain", Username: "u", AllowPlaintext: true}
	for _, tc := range []struct {
		name    string
		cfg     kafka.Config
		fleet   Config
		forward bool
	}{
		{"count only", kafka.Config{}, Config{Topic: "sunset.requests"}, false},
		{"forward only", kafka.Config{}, Config{Topic: "sunset.requests", Count: &off}, true},
		{"filter and count", kafka.Config{Topics: []string{"audit"}, GroupID: "g"}, Config{Topic: "sunset.requests"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Brokers, cfg.SASL = []string{"kafka-0:9092"}, sasl
			var out bytes.Buffer
			c := ingesttest.NewCounter(t, t.TempDir(), time.Now, nil)
			_, err := New(Options{Config: cfg, Fleet: tc.fleet, Forward: tc.forward, Aggregator: c, Tallies: c, Store: counterStore{c}, Logger: zerolog.New(&out),
				Registerer: prometheus.NewRegistry()})
			require.NoError(t, err)
			require.Equal(t, 1, strings.Count(out.String(), "kafka.sasl.allowPlaintext: the SASL PLAIN password is sent to the brokers unencrypted"), out.String())
		})
	}
}
