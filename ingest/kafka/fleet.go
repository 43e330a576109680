package kafka

import (
	"slices"

	kafkago "github.com/segmentio/kafka-go"
)

// FleetConfig is kafka.fleet: replicas that share a topic of compact request
// records, so that each one answers for the whole fleet. Package
// ingest/fleet runs it; the keys live here because they are part of the
// kafka key.
type FleetConfig struct {
	Topic string `mapstructure:"topic" help:"Topic of request records. Setting it turns fleet mode on: kafka.topics are then filtered into it instead of counted here. See fleet.md."`
	// Count is a pointer so that a file that leaves it out means true.
	Count       *bool  `mapstructure:"count" default:"true" help:"Consume every partition of kafka.fleet.topic into this replica's store; false makes a replica that only filters or forwards. Unset means true."`
	Compression string `mapstructure:"compression" help:"Compression of the records produced: none, gzip, snappy, lz4 or zstd."`
}

// Enabled reports whether fleet mode is on.
func (f FleetConfig) Enabled() bool { return f.Topic != "" }

// Counts reports whether this replica counts the fleet's records.
func (f FleetConfig) Counts() bool { return f.Enabled() && (f.Count == nil || *f.Count) }

// codecs are the kafka.fleet.compression values.
var codecs = map[string]kafkago.Compression{"none": 0, "gzip": kafkago.Gzip, "snappy": kafkago.Snappy, "lz4": kafkago.Lz4, "zstd": kafkago.Zstd}

// Codec is the configured compression.
func (f FleetConfig) Codec() kafkago.Compression { return codecs[f.Compression] }

func (f FleetConfig) withDefaults() FleetConfig {
	if f.Compression == "" {
		f.Compression = "lz4"
	}
	return f
}

// validateFleet checks the fleet keys against the rest of c.
func (c Config) validateFleet(bad func(key, format string, args ...any)) {
	f := c.Fleet
	if !f.Enabled() {
		if c.Forward {
			bad("forward", "needs kafka.fleet.topic, the topic to forward requests to")
		}
		return
	}
	if slices.Contains(c.Topics, f.Topic) {
		bad("fleet.topic", "%q is also in kafka.topics; the audit topics and the fleet's topic must differ", f.Topic)
	}
	if _, ok := codecs[f.Compression]; !ok {
		bad("fleet.compression", "%q is not one of none, gzip, snappy, lz4, zstd", f.Compression)
	}
	if !f.Counts() && len(c.Topics) == 0 && !c.Forward {
		bad("fleet.count", "false leaves nothing to do without kafka.topics (filter) or kafka.forward")
	}
}
