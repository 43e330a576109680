package config_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/config"
)

// The fleet's keys come from the environment (or a file) and are checked
// as the config loads, never echoing a secret; so are the topics'
// clusters and the memory budget.
func TestFleetKeysAndBindingsLoad(t *testing.T) {
	good := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	body := "kafka:\n  brokers: [kafka-0:9092]\n  topics: [audit-prod]\n  topicClusters:\n    - topic: audit-prod\n      clusters: [prod]\n  fleet:\n    topic: sunset.requests\n"
	t.Setenv("SUNSET_KAFKA_FLEET_KEYS", "prod p1 "+good+",dev d1 "+good)
	cfg, err := config.Load(config.Flags(), fleetConfigFile(t, body))
	require.NoError(t, err)
	keys, err := cfg.Kafka.Fleet.LoadKeys()
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, []string{"prod"}, cfg.Kafka.TopicClusters[0].Clusters)

	t.Setenv("SUNSET_KAFKA_FLEET_KEYS", "prod p1 c2hvcnQ=")
	_, err = config.Load(config.Flags(), fleetConfigFile(t, body))
	require.ErrorContains(t, err, "kafka.fleet.keys: entry 1: the secret of key p1 is 5 bytes, at least 32 are needed")
	require.NotContains(t, err.Error(), "c2hvcnQ=")

	t.Setenv("SUNSET_KAFKA_FLEET_KEYS", "")
	_, err = config.Load(config.Flags(), fleetConfigFile(t, body+"  queueCapacity: 100\n"))
	require.ErrorContains(t, err, "kafka.memoryBudget: 256 MiB is less than 6 partitions may hold")
}

func fleetConfigFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}
