package gke

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	good := Config{Cluster: "prod", Subscription: "projects/acme-prod/subscriptions/sunset-gke-audit"}.WithDefaults()
	require.Equal(t, DefaultMaxOutstanding, good.MaxOutstanding)
	require.Equal(t, 64<<20, good.MaxOutstandingBytes)
	require.NoError(t, good.Validate())
	require.Equal(t, "acme-prod", good.project())
	require.Equal(t, 5, Config{MaxOutstanding: 5}.WithDefaults().MaxOutstanding, "a set value stays")
	withEndpoint := good
	withEndpoint.Endpoint = "europe-west1-pubsub.googleapis.com:443"
	require.NoError(t, withEndpoint.Validate())
	domain := good
	domain.Subscription = "projects/example.com:acme/subscriptions/s-1"
	require.NoError(t, domain.Validate())

	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Cluster = "" }, "cluster: is required"},
		{func(c *Config) { c.Cluster = strings.Repeat("c", 254) }, "cluster: is 254 bytes, longer than 253"},
		{func(c *Config) { c.Subscription = "" }, "subscription: is required: the Pub/Sub subscription of the Log Router sink's topic, e.g. projects/my-project/subscriptions/sunset-gke-audit"},
		{func(c *Config) { c.Subscription = "sunset-gke-audit" }, `subscription: "sunset-gke-audit" is not projects/<project>/subscriptions/<name>`},
		{func(c *Config) { c.Subscription = "projects/acme-prod/topics/gke-audit" }, `subscription: "projects/acme-prod/topics/gke-audit" is not projects/<project>/subscriptions/<name>`},
		{func(c *Config) { c.Subscription = "projects/acme-prod/subscriptions/9lives" }, `subscription: "projects/acme-prod/subscriptions/9lives" is not projects/<project>/subscriptions/<name>`},
		{func(c *Config) { c.Subscription = "projects/acme-prod/subscriptions/google-x" }, "subscription: names starting with goog are reserved by Pub/Sub"},
		{func(c *Config) { c.MaxOutstanding = -1 }, "maxOutstanding: must be between 1 and 100000, got -1"},
		{func(c *Config) { c.MaxOutstanding = 100001 }, "maxOutstanding: must be between 1 and 100000, got 100001"},
		{func(c *Config) { c.MaxOutstandingBytes = MaxMessageBytes - 1 }, "maxOutstandingBytes: must be between 1048576 (the largest message read) and 1073741824, got 1048575"},
		{func(c *Config) { c.MaxOutstandingBytes = 1<<30 + 1 }, "maxOutstandingBytes: must be between 1048576 (the largest message read) and 1073741824, got 1073741825"},
		{func(c *Config) { c.Endpoint = "pubsub.googleapis.com" }, `endpoint: "pubsub.googleapis.com" is not host:port`},
	} {
		c := good
		tc.change(&c)
		err := c.Validate()
		require.ErrorContains(t, err, tc.want)
		_, err = New(context.Background(), Options{Config: c, Ingester: newAckOrder(nil)})
		require.ErrorContains(t, err, "gke: "+tc.want, "New refuses it too")
	}
	// Every problem at once, in a stable order.
	err := Config{MaxOutstanding: -2}.Validate()
	require.EqualError(t, err, "cluster: is required: the name the cluster's requests are counted under, e.g. prod-gke\n"+
		"maxOutstanding: must be between 1 and 100000, got -2\n"+
		"maxOutstandingBytes: must be between 1048576 (the largest message read) and 1073741824, got 0\n"+
		"subscription: is required: the Pub/Sub subscription of the Log Router sink's topic, e.g. projects/my-project/subscriptions/sunset-gke-audit")

	_, err = New(context.Background(), Options{Config: good})
	require.EqualError(t, err, "gke: no Ingester")
}
