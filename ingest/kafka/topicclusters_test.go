package kafka

import (
	"testing"

	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

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
