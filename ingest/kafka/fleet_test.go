package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFleetConfigValidate(t *testing.T) {
	off := false
	brokers := []string{"kafka-0:9092"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"filter and count", Config{Brokers: brokers, Topics: []string{"audit"}, Fleet: FleetConfig{Topic: "sunset.requests"}}, ""},
		{"count only", Config{Brokers: brokers, Fleet: FleetConfig{Topic: "sunset.requests"}}, ""},
		{"forward only", Config{Brokers: brokers, Forward: true, Fleet: FleetConfig{Topic: "sunset.requests", Count: &off}}, ""},
		{"fleet without brokers", Config{Fleet: FleetConfig{Topic: "sunset.requests"}},
			"kafka.brokers: is required when kafka.fleet.topic is set, e.g. [kafka-0:9092]"},
		{"forward without a topic", Config{Forward: true},
			"kafka.brokers: is required when kafka.forward is set, e.g. [kafka-0:9092]\n" +
				"kafka.forward: needs kafka.fleet.topic, the topic to forward requests to\n" +
				"kafka.topics: is required when kafka.brokers is set (or kafka.fleet.topic, to count a fleet's requests)"},
		{"same topic twice", Config{Brokers: brokers, Topics: []string{"audit"}, Fleet: FleetConfig{Topic: "audit"}},
			`kafka.fleet.topic: "audit" is also in kafka.topics; the audit topics and the fleet's topic must differ`},
		{"nothing to do", Config{Brokers: brokers, Fleet: FleetConfig{Topic: "sunset.requests", Count: &off}},
			"kafka.fleet.count: false leaves nothing to do without kafka.topics (filter) or kafka.forward"},
		{"unknown codec", Config{Brokers: brokers, Fleet: FleetConfig{Topic: "sunset.requests", Compression: "brotli"}},
			`kafka.fleet.compression: "brotli" is not one of none, gzip, snappy, lz4, zstd`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.WithDefaults().Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
		})
	}
}
