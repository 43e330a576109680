package eks

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
	"github.com/kube-sunset/sunset/internal/testutil/cloudwatchtest"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// events gives lines CloudWatch times one millisecond apart from start.
func events(start time.Time, lines [][]byte) []cloudwatchtest.Event {
	out := make([]cloudwatchtest.Event, len(lines))
	for i, l := range lines {
		out[i] = cloudwatchtest.Event{Time: start.Add(time.Duration(i) * time.Millisecond), Message: string(l)}
	}
	return out
}

// countingLines are the captured v1.36 events that each count: completed
// requests that kube-apiserver annotated deprecated.
func countingLines(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for _, l := range ingesttest.CapturedLines(t, testdata) {
		if bytes.Contains(l, []byte(`"stage":"ResponseComplete"`)) && bytes.Contains(l, []byte(`"k8s.io/deprecated":"true"`)) &&
			bytes.Contains(l, []byte(`"requestReceivedTimestamp":"2026-11-21T`)) {
			out = append(out, l)
		}
	}
	require.Greater(t, len(out), 40, "the captures hold enough requests that count")
	return out
}

// feed puts every captured line, alternately into the two audit streams,
// and the counting ones again under new auditIDs into a stream of another
// prefix, which must be passed over (half an hour later, so that reading
// it would show in the watermark). It returns the independent count of
// the audit streams, how many events they hold and the newest's time.
func (e *env) feed(start time.Time) (*auditcount.Counter, int, time.Time) {
	e.t.Helper()
	lines := ingesttest.CapturedLines(e.t, testdata)
	want := auditcount.New(auditcount.Options{Lifecycle: auditcount.BuiltinLifecycle(e.t)})
	var a, b, other [][]byte
	for i, l := range lines {
		if i%2 == 0 {
			a = append(a, l)
			want.Add(e.t, e.cluster, streamA, l)
		} else {
			b = append(b, l)
			want.Add(e.t, e.cluster, streamB, l)
		}
	}
	for i, l := range countingLines(e.t) {
		other = append(other, withAuditID(e.t, l, fmt.Sprintf("other-stream-%d", i)))
	}
	e.cw.Put(e.t, e.group, streamA, events(start, a))
	e.cw.Put(e.t, e.group, streamB, events(start.Add(time.Microsecond), b))
	e.cw.Put(e.t, e.group, otherStream, events(start.Add(time.Hour/2), other))
	newest := start.Add(time.Duration(len(a)-1) * time.Millisecond)
	if len(b) == len(a) {
		newest = start.Add(time.Microsecond + time.Duration(len(b)-1)*time.Millisecond)
	}
	return want, len(lines), time.UnixMilli(newest.UnixMilli())
}

// A feed over many pages, from two apiservers' streams beside a stream of
// another prefix, counts exactly what the independent count says, each
// request under its stream as the apiserver. A poll with nothing new to
// read reads no stream, and a sweep that reads it all again counts
// nothing more.
func TestCountsEveryPageOfBothStreamsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want, n, newest := e.feed(time.Now().Add(-40 * time.Minute))
	var mu sync.Mutex
	var reported []time.Time
	from := time.Now()
	r := e.start(func(o *Options, _ *knobs, _ func()) {
		o.Newest = func(cluster string, t time.Time) {
			mu.Lock()
			defer mu.Unlock()
			if cluster == e.cluster {
				reported = append(reported, t)
			}
		}
	})
	require.NoError(t, r.waitPoll(from))
	mu.Lock()
	require.NotEmpty(t, reported)
	require.True(t, slices.IsSortedFunc(reported, time.Time.Compare), "Newest only moves forward")
	require.True(t, newest.Equal(reported[len(reported)-1]), "Newest is told the newest audit event's time, %s, not %s", newest, reported[len(reported)-1])
	mu.Unlock()
	require.Equal(t, float64(newest.UnixMilli())/1e3, testutil.ToFloat64(r.src.metrics.watermark))
	e.requireCounts(want)
	_, dups, nodes, reasons, _ := e.rec.seen()
	require.Zero(t, dups, "no request was handed over twice")
	require.Equal(t, map[string]bool{streamA: true, streamB: true}, nodes, "each stream is an apiserver; the other prefix is passed over")
	require.Empty(t, reasons, "every captured line is an audit event")
	require.Equal(t, n, r.events(eventNew))
	require.Zero(t, r.events(eventDuplicate))
	require.Greater(t, r.requests(opFilterLogEvents, requestOK), (n+19)/20, "20 events a page: many pages")
	require.Equal(t, 1, r.requests(opDescribeLogStreams, requestOK), "one listing of the streams a poll")
	ok, why := r.src.Ready()
	require.True(t, ok, why)

	// Nothing was ingested since: the next poll lists the streams and
	// reads none of them.
	calls := e.cw.Calls("FilterLogEvents")
	r.pollNow()
	require.Equal(t, calls, e.cw.Calls("FilterLogEvents"), "no stream read again between sweeps")
	require.Zero(t, r.events(eventDuplicate))

	// An overlap later a sweep reads every event again, inside its
	// window, and skips them.
	e.advance(DefaultOverlap)
	r.pollNow()
	require.Equal(t, n, r.events(eventNew))
	require.Equal(t, n, r.events(eventDuplicate))
	e.requireCounts(want)
}

// A source stopped between two commits, as by SIGKILL, and started again
// on the same store neither loses an event nor counts one twice: the
// events of the pages committed are skipped as duplicates, the rest read.
func TestRestartMidFeedLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want, n, _ := e.feed(time.Now().Add(-10 * time.Minute))
	pages := 0
	r1 := e.start(func(_ *Options, k *knobs, stop func()) {
		k.committed = func(sum pageSummary) {
			if sum.New > 0 {
				if pages++; pages == 4 {
					stop()
				}
			}
		}
	})
	r1.ended()
	first := r1.events(eventNew)
	require.Greater(t, first, 60, "four pages of up to 20 committed")
	require.LessOrEqual(t, first, 80)
	counted, _, _, _, _ := e.rec.seen()
	require.Less(t, counted, int(want.Count(auditcount.Last24h(e.clock))), "stopped mid-feed")

	from := time.Now()
	r2 := e.start(nil)
	require.NoError(t, r2.waitPoll(from))
	e.requireCounts(want)
	require.Equal(t, first, r2.events(eventDuplicate), "what the first run committed is skipped")
	require.Equal(t, n-first, r2.events(eventNew), "the rest is read")
	_, dups, _, _, _ := e.rec.seen()
	require.Zero(t, dups, "no request was handed over twice")
}

// Past the checkpoint's bound on the events it remembers, the events it
// forgot are read again after a restart and handed over, and the store's
// marks keep them from counting twice.
func TestForgottenEventsStillCountOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lines := countingLines(t)
	e.cw.Put(t, e.group, streamA, events(time.Now().Add(-10*time.Minute), lines))
	want := e.independent(streamA, lines...)
	const remembered = 5
	bound := func(_ *Options, k *knobs, _ func()) { k.maxSeen = remembered }
	from := time.Now()
	r1 := e.start(bound)
	require.NoError(t, r1.waitPoll(from))
	r1.stop()
	raw, ok, err := e.rec.Cursor("eks:" + e.cluster + ":" + e.group)
	require.NoError(t, err)
	require.True(t, ok)
	c, err := decodeCheckpoint(raw)
	require.NoError(t, err)
	require.Len(t, c.streams[streamA].seen, remembered)

	from = time.Now()
	r2 := e.start(bound)
	require.NoError(t, r2.waitPoll(from))
	require.Equal(t, remembered, r2.events(eventDuplicate))
	require.Equal(t, len(lines)-remembered, r2.events(eventNew))
	e.requireCounts(want)
	_, dups, _, _, _ := e.rec.seen()
	require.Equal(t, len(lines)-remembered, dups, "each forgotten request was found marked in the store")
}
