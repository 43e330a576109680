package gke

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/pubsubtest"
)

// prefilterAgrees requires that the pre-filter sets entry aside only when
// the aggregator, given the event decoded in full, would not count it,
// with the result the pre-filter gives; and that an entry it keeps
// decodes as it does without it, or fails alike.
func prefilterAgrees(t *testing.T, a *aggregate.Aggregator, p *auditjson.Prefilter, entry []byte) (setAside bool) {
	t.Helper()
	full, fullNode, fullErr := decode(entry)
	ev, node, aside, err := decodeFiltered(entry, p)
	require.Equal(t, fullErr, err)
	if err != nil {
		return false
	}
	require.Equal(t, fullNode, node)
	if aside.Result == "" {
		require.Equal(t, full, ev)
		return false
	}
	planned, err := a.Plan(classify.Origin{Source: SourceName, Cluster: "c", Node: node}, []classify.Event{full})
	require.NoError(t, err)
	require.Equal(t, aside.Result, planned[0].Result, "set aside with the result the aggregator gives")
	require.Equal(t, full.Verb == "get" || full.Verb == "list" || full.Verb == "watch", aside.Read)
	return true
}

// Every captured event, as a GKE entry, and every entry of testdata/, is
// judged by the pre-filter as the aggregator judges its full decode: the
// same counts, the same unreadable entries, and the reads it sets aside
// told.
func TestPrefilterAgreesWithTheFullDecode(t *testing.T) {
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return ingesttest.CapturedNow }, nil)
	p := auditjson.NewPrefilter(c.Interest())
	entries, aside := 0, 0
	for _, line := range ingesttest.CapturedLines(t, "../../testdata") {
		entry, err := pubsubtest.LogEntry(line)
		if err != nil {
			continue
		}
		entries++
		if prefilterAgrees(t, c.Aggregator, p, entry) {
			aside++
		}
	}
	names, err := filepath.Glob("testdata/entries/*.json")
	require.NoError(t, err)
	for _, n := range names {
		entry, err := os.ReadFile(n)
		require.NoError(t, err)
		prefilterAgrees(t, c.Aggregator, p, entry)
	}
	require.Equal(t, 255, entries)
	require.Equal(t, 99, aside, "the captures that cannot count, without a deprecated annotation, are set aside")
}

// FuzzPrefilter holds the pre-filtered decode of an entry to the full one.
func FuzzPrefilter(f *testing.F) {
	names, err := filepath.Glob("testdata/entries/*.json")
	require.NoError(f, err)
	for _, n := range names {
		entry, err := os.ReadFile(n)
		require.NoError(f, err)
		f.Add(entry)
	}
	for _, line := range ingesttest.CapturedLines(f, "../../testdata")[:20] {
		if entry, err := pubsubtest.LogEntry(line); err == nil {
			f.Add(entry)
		}
	}
	c := ingesttest.NewCounter(f, f.TempDir(), func() time.Time { return ingesttest.CapturedNow }, nil)
	p := auditjson.NewPrefilter(c.Interest())
	f.Fuzz(func(t *testing.T, entry []byte) {
		prefilterAgrees(t, c.Aggregator, p, entry)
	})
}
