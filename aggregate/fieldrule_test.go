package aggregate

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/store"
)

// kubeletPatch sets the deprecated kube-proxy version field of a node.
func kubeletPatch(id string) classify.Event {
	return classify.Event{ID: id, Stage: classify.StageResponseComplete, Verb: "patch", Username: "system:node:worker-1", UserAgent: "kubelet/v1.30.2",
		ObjectRef: &classify.ObjectRef{Version: "v1", Resource: "nodes", Subresource: "status"}, RequestReceived: now.Add(-10 * time.Minute),
		RequestObject: []byte(`{"status":{"nodeInfo":{"kubeProxyVersion":"v1.30.2"}}}`)}
}

// A field rule's matches are committed as the field rule's counts, never
// as an API's, whether ingested here or classified by one replica and
// applied by another.
func TestFieldRuleMatchesCountUnderTheirRule(t *testing.T) {
	rules, err := fieldrule.New(nil)
	require.NoError(t, err)
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	require.NoError(t, err)
	a := New(Options{Store: st, Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(), Now: func() time.Time { return now }, FieldRules: rules})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })

	origin := classify.Origin{Source: "test", Cluster: "c", Node: "master-0"}
	sum, err := a.Ingest(context.Background(), origin, []classify.Event{kubeletPatch("a"), deprecatedEvent("b", "u")})
	require.NoError(t, err)
	require.Equal(t, 1, sum.FieldMatches)
	require.Equal(t, 1, sum.Counted)

	reqs, _ := a.Classify(origin, []classify.Event{kubeletPatch("c"), kubeletPatch("a")})
	require.Len(t, reqs, 2)
	// The request's identity is its received time (in nanoseconds) and
	// its auditID; older versions used the auditID alone.
	require.Equal(t, countkey.Request{ID: "1795290000000000000/c#field:kube-proxy-version", LegacyID: "c#field:kube-proxy-version",
		FieldRule: "kube-proxy-version", Key: countkey.CountKey{Cluster: "c",
			Cell: countkey.Cell{Hour: now.Truncate(time.Hour), Node: "master-0", Subresource: "status", Username: "system:node:worker-1",
				UserAgent: "kubelet/v1.30.2", Verb: "patch"}}}, reqs[0])
	require.Equal(t, "1795290000000000000/c", reqs[0].EventID())
	sum, err = a.Apply(context.Background(), "fleet", reqs)
	require.NoError(t, err)
	require.Equal(t, classify.Summary{FieldMatches: 1}, sum, "the second was counted by Ingest")

	require.Equal(t, []string{"endpoints.v1"}, func() (out []string) {
		for _, i := range st.APIs() {
			out = append(out, i.API)
		}
		return out
	}())
	infos := st.FieldRules()
	require.Len(t, infos, 1)
	require.Equal(t, "kube-proxy-version", infos[0].Rule)
	var n uint64
	require.NoError(t, st.ScanFieldRuleCounts("c", "kube-proxy-version", now.Add(-time.Hour), now, func(_ store.FieldRuleKey, c uint64) error {
		n += c
		return nil
	}))
	require.Equal(t, uint64(2), n)
}
