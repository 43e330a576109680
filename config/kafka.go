package config

import (
	"github.com/kube-sunset/sunset/ingest/fleet"
	"github.com/kube-sunset/sunset/ingest/kafka"
)

// KafkaConfig is the kafka key: Kafka's settings, which package kafka
// declares, and beside them the fleet's, which package fleet declares
// (kafka.fleet) and runs (kafka.forward). Its keys are written as one
// key in the file; the two packages stay apart in the code.
type KafkaConfig struct {
	kafka.Config `mapstructure:",squash"`
	Fleet        fleet.Config `mapstructure:"fleet"`
	Forward      bool         `mapstructure:"forward"`
}

// Enabled reports whether anything reads Kafka: a consumer of
// kafka.topics, the fleet or its forwarding.
func (k KafkaConfig) Enabled() bool {
	return k.Config.Enabled() || k.Fleet.Enabled() || k.Forward
}

// WithDefaults fills unset fields of both.
func (k KafkaConfig) WithDefaults() KafkaConfig {
	k.Config, k.Fleet = k.Config.WithDefaults(), k.Fleet.WithDefaults()
	return k
}

// Validate checks the kafka key, Kafka's settings and the fleet's
// together, for they depend on each other: which key needs the brokers,
// whether kafka.topics is needed. Call it with defaults filled in.
func (k KafkaConfig) Validate() error {
	if !k.Enabled() {
		return nil
	}
	return k.Fleet.Validate(k.Config, k.Forward)
}
