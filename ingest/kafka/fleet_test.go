package kafka

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
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

func TestFleetKeysValidate(t *testing.T) {
	dir := t.TempDir()
	good := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 31))
	file := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(file, []byte("# comment\n\nprod k1 "+good+"\nprod k1 "+good+"\nprod k2\nprod k/3 "+good+"\n"), 0o600))
	brokers := []string{"kafka-0:9092"}
	for _, tc := range []struct {
		name string
		f    FleetConfig
		want string
	}{
		{"file and environment", FleetConfig{KeysFile: file + ".none", Keys: "dev d1 " + good + ",prod p1 " + good}, "kafka.fleet.keysFile: cannot read " + file + ".none"},
		{"environment", FleetConfig{Keys: "dev d1 " + good + "\nprod p1 " + strings.TrimRight(good, "=")}, ""},
		{"bad lines, never a secret", FleetConfig{KeysFile: file},
			"kafka.fleet.keysFile: " + file + " line 4: key k1 of cluster prod is given twice\n" +
				"kafka.fleet.keysFile: " + file + " line 5: want <cluster> <key id> <secret>, got 2 fields\n" +
				"kafka.fleet.keysFile: " + file + ` line 6: key id "k/3" is not 1 to 64 of A-Z a-z 0-9 . _ -`},
		{"short and not base64", FleetConfig{Keys: "dev d1 " + short + ",dev d2 !!!"},
			"kafka.fleet.keys: entry 1: the secret of key d1 is 31 bytes, at least 32 are needed (openssl rand -base64 32)\n" +
				"kafka.fleet.keys: entry 2: the secret of key d2 is not base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.Topic = "sunset.requests"
			err := Config{Brokers: brokers, Fleet: tc.f}.WithDefaults().Validate()
			if tc.want == "" {
				require.NoError(t, err)
				keys, err := tc.f.LoadKeys()
				require.NoError(t, err)
				require.Len(t, keys, 2)
				require.Equal(t, FleetKey{Cluster: "dev", ID: "d1", Secret: bytes.Repeat([]byte{7}, 32)}, keys[0])
				return
			}
			require.EqualError(t, err, tc.want)
			require.NotContains(t, err.Error(), good)
		})
	}
}

func TestTopicClustersValidate(t *testing.T) {
	brokers := []string{"kafka-0:9092"}
	err := Config{Brokers: brokers, Topics: []string{"a", "b"}, TopicClusters: []TopicClusters{
		{Topic: "a", Clusters: []string{"prod"}}, {Topic: "c", Clusters: []string{"x"}}, {Topic: "a", Clusters: []string{"dev"}}, {Topic: "b"},
	}}.WithDefaults().Validate()
	require.EqualError(t, err, `kafka.topicClusters[1].topic: "c" is not one of kafka.topics`+"\n"+
		`kafka.topicClusters[2].topic: "a" is listed twice`+"\n"+
		`kafka.topicClusters[3].clusters: lists no cluster (or an empty one) for topic "b"`)
}

// A raw topic bound to clusters cannot claim another: its messages that
// name one (header, field, or default-cluster) are poison
// cluster_not_allowed, and never reach the ingester; one that names none
// is the topic's only cluster. Topics not bound name any cluster.
func TestTopicClusterBinding(t *testing.T) {
	c, err := New(Options{Config: Config{Brokers: []string{"kafka-0:9092"}, Topics: []string{"prod-audit", "shared", "two"},
		ClusterHeader: "cluster", ClusterField: "cluster", TopicClusters: []TopicClusters{
			{Topic: "prod-audit", Clusters: []string{"prod"}}, {Topic: "two", Clusters: []string{"eu", "us"}}}},
		DefaultCluster: "fallback", Ingester: &ingesttest.Flaky{}, Logger: zerolog.Nop()})
	require.NoError(t, err)
	event := func(id, cluster string) []byte {
		field := ""
		if cluster != "" {
			field = `,"cluster":"` + cluster + `"`
		}
		return []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `","stage":"ResponseComplete","verb":"get","annotations":{"k8s.io/deprecated":"true"}` + field + `}`)
	}
	hdr := func(cluster string) []kafkago.Header {
		return []kafkago.Header{{Key: "cluster", Value: []byte(cluster)}}
	}
	msgs := []kafkago.Message{
		{Topic: "prod-audit", Offset: 0, Value: event("1", "prod")},
		{Topic: "prod-audit", Offset: 1, Value: event("2", "")},                      // the topic's cluster
		{Topic: "prod-audit", Offset: 2, Value: event("3", "dev")},                   // refused
		{Topic: "prod-audit", Offset: 3, Value: event("4", ""), Headers: hdr("dev")}, // refused
		{Topic: "shared", Offset: 4, Value: event("5", "dev")},
		{Topic: "shared", Offset: 5, Value: event("6", "")}, // default-cluster
		{Topic: "two", Offset: 6, Value: event("7", "us")},
		{Topic: "two", Offset: 7, Value: event("8", "")}, // default-cluster, not one of two's: refused
	}
	p := &partition{c: c, topic: "prod-audit"}
	b := p.prepare(msgs)
	got := map[string][]string{}
	for _, g := range b.origins {
		for _, e := range g.Events {
			got[g.Origin.Cluster] = append(got[g.Origin.Cluster], e.ID)
		}
	}
	require.Equal(t, map[string][]string{"prod": {"1", "2"}, "dev": {"5"}, "fallback": {"6"}, "us": {"7"}}, got)
	var refused []int64
	for _, ps := range b.poison {
		require.Equal(t, ReasonClusterNotAllowed, ps.Reason)
		refused = append(refused, ps.Offset)
	}
	require.Equal(t, []int64{2, 3, 7}, refused)
	require.Equal(t, 5, b.ok)
}
