package eks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// With the pre-filter, the feed of two streams counts exactly what the
// independent count says, as without it (TestCountsEveryPageOfBothStreamsOnce):
// the events that cannot count are set aside undecoded and told to the
// aggregator, reads among them, and are still new events to the source.
func TestPrefilteredFeedCountsAsTheFullDecode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want, n, _ := e.feed(time.Now().Add(-40 * time.Minute))
	from := time.Now()
	r := e.start(func(o *Options, _ *knobs, _ func()) { o.Prefilter = auditjson.NewPrefilter(e.rec.Interest()) })
	require.NoError(t, r.waitPoll(from))
	e.requireCounts(want)
	_, dups, nodes, reasons, invalid := e.rec.seen()
	require.Zero(t, dups)
	require.Equal(t, map[string]bool{streamA: true, streamB: true}, nodes)
	require.Empty(t, reasons)
	require.Zero(t, invalid)
	require.Equal(t, n, r.events(eventNew))
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	require.Equal(t, classify.Prefiltered{OtherStage: 62, NotDeprecated: 39, Reads: 52}, e.rec.aside)
}
