package eks

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, Config{Cluster: "prod", LogGroup: "/aws/eks/prod/cluster", StreamPrefix: "kube-apiserver-audit-",
		PollInterval: 15 * time.Second, Overlap: 5 * time.Minute, StartFrom: time.Hour, PageSize: 10000}, Config{Cluster: "prod"}.WithDefaults())
	set := Config{Cluster: "prod", LogGroup: "/aws/eks/prod-eks/cluster", StreamPrefix: "audit-", PollInterval: time.Minute,
		Overlap: time.Minute, StartFrom: 24 * time.Hour, PageSize: 500, Region: "eu-west-1", Endpoint: "https://vpce-1.logs.eu-west-1.vpce.amazonaws.com"}
	require.Equal(t, set, set.WithDefaults(), "set fields are kept")
	require.NoError(t, set.WithDefaults().Validate("eks"))
}

func TestValidate(t *testing.T) {
	t.Parallel()
	valid := Config{Cluster: "prod"}.WithDefaults()
	for _, c := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no cluster", func(c *Config) { *c = Config{}.WithDefaults() },
			"eks.cluster: is required: the name to count this EKS cluster's requests under, e.g. prod-eu (also the default log group's /aws/eks/<cluster>/cluster)"},
		{"long cluster", func(c *Config) { c.Cluster = strings.Repeat("c", 254) }, "eks.cluster: must be at most 253 bytes without surrounding spaces"},
		{"bad log group", func(c *Config) { c.LogGroup = "/aws/eks/prod/cluster:*" },
			`eks.logGroup: "/aws/eks/prod/cluster:*" is not a CloudWatch log group name (up to 512 of A-Z a-z 0-9 . - _ / #), e.g. /aws/eks/prod-eu/cluster`},
		{"no stream prefix", func(c *Config) { c.StreamPrefix = "" }, "eks.streamPrefix: is required; EKS names audit streams kube-apiserver-audit-<hash>"},
		{"bad region", func(c *Config) { c.Region = "Ireland" }, `eks.region: "Ireland" is not an AWS Region, e.g. eu-west-1`},
		{"fast polls", func(c *Config) { c.PollInterval = 100 * time.Millisecond },
			"eks.pollInterval: 100ms is below 1s: FilterLogEvents allows 5 calls a second per account and Region, shared with every other caller"},
		{"negative overlap", func(c *Config) { c.Overlap = -time.Second },
			"eks.overlap: -1s is outside 0 to 1h0m0s; EKS delivers within a few minutes, and the default is 5m0s"},
		{"long overlap", func(c *Config) { c.Overlap = 2 * time.Hour },
			"eks.overlap: 2h0m0s is outside 0 to 1h0m0s; EKS delivers within a few minutes, and the default is 5m0s"},
		{"negative startFrom", func(c *Config) { c.StartFrom = -time.Hour },
			"eks.startFrom: -1h0m0s is negative; it is how far back a cluster read for the first time starts, e.g. 1h"},
		{"bad endpoint", func(c *Config) { c.Endpoint = "logs.eu-west-1.amazonaws.com" },
			"eks.endpoint: is not an http(s) URL, e.g. https://logs.eu-west-1.amazonaws.com or a VPC endpoint's https://vpce-....logs.eu-west-1.vpce.amazonaws.com"},
	} {
		cfg := valid
		c.change(&cfg)
		err := cfg.Validate("eks")
		require.Error(t, err, c.name)
		require.Equal(t, c.want, err.Error(), c.name)
	}
	// Every problem at once, in a stable order.
	err := Config{Cluster: "prod", Region: "x", PollInterval: time.Millisecond, StreamPrefix: "p", LogGroup: "g", Overlap: -1, PageSize: 10001}.Validate("eks")
	require.EqualError(t, err, strings.Join([]string{
		"eks.overlap: -1ns is outside 0 to 1h0m0s; EKS delivers within a few minutes, and the default is 5m0s",
		"eks.pageSize: 10001 is outside 1 to 10000, FilterLogEvents' limit",
		"eks.pollInterval: 1ms is below 1s: FilterLogEvents allows 5 calls a second per account and Region, shared with every other caller",
		`eks.region: "x" is not an AWS Region, e.g. eu-west-1`,
	}, "\n"))
}

// New checks the config, the ingester and the Region before Run; a source
// not yet run is not ready. Sources of several clusters share a registry.
func TestNew(t *testing.T) {
	t.Parallel()
	c := ingesttest.NewCounter(t, t.TempDir(), nil, nil)
	reg := prometheus.NewRegistry()
	opts := func(cluster, region string) Options {
		return Options{Config: Config{Cluster: cluster}, Ingester: c, Tallies: c, Cursors: c, Logger: zerolog.Nop(), Registerer: reg,
			AWSConfig: &aws.Config{Region: region}}
	}
	a, err := New(opts("a", "eu-west-1"))
	require.NoError(t, err)
	ok, why := a.Ready()
	require.False(t, ok)
	require.Equal(t, "eks a: the first poll of /aws/eks/a/cluster has not finished", why)
	_, err = New(opts("b", "eu-west-1"))
	require.NoError(t, err, "a second cluster on the same registry")

	_, err = New(opts("c", ""))
	require.EqualError(t, err, "eks c: no AWS Region: set eks.region to the cluster's, or AWS_REGION in the environment")
	o := opts("d", "")
	o.Config.Region = "eu-central-1"
	d, err := New(o)
	require.NoError(t, err)
	require.Equal(t, "eu-central-1", d.region)
	_, err = New(Options{Config: Config{Cluster: "e"}, AWSConfig: &aws.Config{Region: "eu-west-1"}})
	require.EqualError(t, err, "eks: Options.Ingester and Options.Cursors are required")
	_, err = New(Options{Config: Config{}, Ingester: c, Tallies: c, Cursors: c})
	require.ErrorContains(t, err, "eks.cluster: is required")
}
