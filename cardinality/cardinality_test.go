package cardinality

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

func TestLabelValues(t *testing.T) {
	g := New(Options{})
	// Verbs: the request verbs and "other", 10 values of at most 20
	// characters, OpenShift's byVerb limits.
	require.LessOrEqual(t, len(requestVerbs)+1, 10)
	for v := range requestVerbs {
		require.LessOrEqual(t, len(v), 20, v)
		require.Equal(t, v, Verb(v))
	}
	for _, v := range []string{"", "GET", "impersonate", "frobnicate", strings.Repeat("x", 100)} {
		require.Equal(t, Other, Verb(v), v)
	}

	for _, tc := range []struct{ group, version, resource, want string }{
		{"", "v1", "endpoints", "/v1/endpoints"},
		{"batch", "v1beta1", "cronjobs", "batch/v1beta1/cronjobs"},
		{"e2e.example.com", "v1beta1", "widgets", "e2e.example.com/v1beta1/widgets"},
		{"Example.com", "v1", "widgets", "other/other/other"},
		{"e2e.example.com", "v1", "Widgets", "other/other/other"},
		{"e2e.example.com", "v1/x", "widgets", "other/other/other"},
		{"e2e.example.com", "", "widgets", "other/other/other"},
		{"a\u00fcb.com", "v1", "widgets", "other/other/other"},
		{strings.Repeat("a", 254), "v1", "widgets", "other/other/other"},
	} {
		g, v, r := g.API(tc.group, tc.version, tc.resource)
		require.Equal(t, tc.want, g+"/"+v+"/"+r, tc)
	}

	require.Empty(t, Subresource(""))
	require.Equal(t, "status", Subresource("status"))
	require.Equal(t, Other, Subresource("Status!"))
	require.Empty(t, Release(""))
	require.Equal(t, "1.37", Release("v1.37.2"))
	require.Equal(t, Other, Release("soon"))
}

// Configured clusters keep their names; of the others, the first
// MaxClusters do; the overflow is counted and logged once.
func TestClusterCap(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs strings.Builder
	g := New(Options{MaxClusters: 2, Clusters: []string{"prod", "default"}, Registerer: reg, Logger: zerolog.New(&logs)})
	var got []string
	for _, c := range []string{"prod", "a", "default", "b", "c", "a", "d", "b", "prod"} {
		got = append(got, g.Cluster("m", c))
	}
	require.Equal(t, []string{"prod", "a", "default", "b", Other, "a", Other, "b", "prod"}, got)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_metrics_overflow_total Label sets that did not get a series of their own, by metric and the limit that folded them into "other" (metrics.max-series, metrics.max-clusters): for counters each increment, for gauges each label set at each refresh.
# TYPE sunset_metrics_overflow_total counter
sunset_metrics_overflow_total{limit="metrics.max-clusters",metric="m"} 2
`)))
	require.Equal(t, 1, strings.Count(logs.String(), `"metric":"m","limit":"metrics.max-clusters"`))
}

// A metric keeps its first MaxSeries label sets; later ones are folded,
// keeping only the labels from fixed sets.
func TestSeriesCap(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := New(Options{MaxSeries: 3, Registerer: reg})
	s := g.Series("m", []string{"api", "verb", "dry_run"}, "dry_run")
	var got []string
	for i := range 6 {
		got = append(got, strings.Join(s.Labels([]string{fmt.Sprintf("api-%d", i%4), "get", fmt.Sprint(i%2 == 0)}), ","))
	}
	got = append(got, strings.Join(s.Labels([]string{"api-1", "get", "true"}), ","))
	require.Equal(t, []string{
		"api-0,get,true", "api-1,get,false", "api-2,get,true",
		"other,other,false", // api-3: the fourth label set
		"api-0,get,true",    // known ones keep their series
		"api-1,get,false",
		"other,other,true", // api-1 with dry_run=true is a new label set
	}, got)
	require.Equal(t, 2.0, testutil.ToFloat64(g.overflow.WithLabelValues("m", LimitMaxSeries)))
}
