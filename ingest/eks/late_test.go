package eks

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/internal/testutil/cloudwatchtest"
)

// A commit that fails (a full disk, a crash) makes the poll read again
// from the checkpoint committed before it: the pages committed are
// skipped as duplicates, and the failed one is read and counted once.
func TestFailedCommitReadsThePageAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lines := countingLines(t)
	half := len(lines) / 2
	e.cw.Put(t, e.group, streamA, events(time.Now().Add(-10*time.Minute), lines[:half]))
	e.cw.Put(t, e.group, streamB, events(time.Now().Add(-9*time.Minute), lines[half:]))
	want := e.independent(streamA, lines[:half]...)
	for _, l := range lines[half:] {
		want.Add(t, e.cluster, streamB, l)
	}
	const failedAt = 3
	commits, cursorless := 0, 0
	e.rec.failCommit = func(_ classify.Origin, cursors int) bool {
		if cursors != 1 {
			cursorless++
		}
		commits++
		return commits == failedAt
	}
	from := time.Now()
	r := e.start(nil)
	require.ErrorContains(t, r.waitPoll(from), "test: commit refused")
	require.NoError(t, r.waitPoll(from), "retried at once")
	e.requireCounts(want)
	require.Zero(t, cursorless, "every commit carries the checkpoint")
	_, dups, _, _, _ := e.rec.seen()
	require.Zero(t, dups, "nothing of the failed page was committed, nor handed over twice")
	require.Equal(t, len(lines), r.events(eventNew), "metrics count a page once it is committed")
	require.Equal(t, (failedAt-1)*20, r.events(eventDuplicate), "the pages committed before the failure are skipped")
}

// A sweep, every overlap, reads each stream again from two overlaps
// before where it stood at the previous sweep, and counts nothing twice.
// An event that arrives late in its stream, inside the overlap behind its
// newest, is counted; one over an overlap behind is counted too, and
// also in sunset_eks_late_events_total; one over two overlaps behind is
// not read.
func TestSweepsFindLateEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lines := countingLines(t)
	n := len(lines) - 15
	start := time.Now().Add(-40 * time.Minute)
	e.cw.Put(t, e.group, streamA, events(start, lines[:n]))
	want := e.independent(streamA, lines[:n]...)
	from := time.Now()
	r := e.start(nil)
	require.NoError(t, r.waitPoll(from))
	e.requireCounts(want)
	// The first poll swept the stream from where reading began; an
	// overlap later a sweep begins from the stream's newest, and reads
	// it all again.
	e.advance(DefaultOverlap)
	r.pollNow()
	require.Equal(t, n, r.events(eventDuplicate))
	require.Equal(t, n, r.events(eventNew))
	e.requireCounts(want)

	newest := start.Add(time.Duration(n-1) * time.Millisecond)
	late := make([][]byte, 5)
	tooLate := make([][]byte, 5)
	lost := make([][]byte, 5)
	for i := range late {
		late[i] = withAuditID(t, lines[n+i], fmt.Sprintf("late-%d", i))
		tooLate[i] = withAuditID(t, lines[n+5+i], fmt.Sprintf("too-late-%d", i))
		lost[i] = withAuditID(t, lines[n+10+i], fmt.Sprintf("lost-%d", i))
		want.Add(t, e.cluster, streamA, late[i])
		want.Add(t, e.cluster, streamA, tooLate[i])
	}
	// One put: a batch is in time order.
	var batch []cloudwatchtest.Event
	batch = append(batch, events(newest.Add(-2*DefaultOverlap-time.Minute), lost)...)
	batch = append(batch, events(newest.Add(-DefaultOverlap-time.Minute), tooLate)...)
	batch = append(batch, events(newest.Add(-time.Minute), late)...)
	e.cw.Put(t, e.group, streamA, batch)
	r.pollNow()
	require.Equal(t, n, r.events(eventNew), "between sweeps, a read starts at the stream's newest")
	e.advance(DefaultOverlap)
	r.pollNow()
	require.Equal(t, n+len(late)+len(tooLate), r.events(eventNew), "the sweep reads the late events, and not those over two overlaps behind")
	require.Equal(t, len(tooLate), r.late())
	e.requireCounts(want)
	_, dups, _, _, _ := e.rec.seen()
	require.Zero(t, dups)

	// The stream is settled now: nothing was ingested since it was read,
	// nor in the overlap before the sweep began. It is not read again
	// until something is.
	e.advance(DefaultOverlap)
	calls := e.cw.Calls("FilterLogEvents")
	r.pollNow()
	require.Equal(t, calls, e.cw.Calls("FilterLogEvents"), "a settled stream is not read")
}

// An apiserver's stream that reaches CloudWatch 20 minutes behind
// another's, four overlaps, loses nothing: each stream is read from its
// own position. With one watermark for the group, the late stream's
// events fell before the overlap of the other's newest and were missed.
func TestStreamFarBehindAnotherLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lines := countingLines(t)
	q := len(lines) / 4
	t0 := time.Now().Add(-45 * time.Minute)
	// Both apiservers' first events, then A's half an hour on.
	e.cw.Put(t, e.group, streamA, events(t0, lines[:q]))
	e.cw.Put(t, e.group, streamB, events(t0, lines[q:2*q]))
	want := e.independent(streamA, lines[:q]...)
	for _, l := range lines[q : 2*q] {
		want.Add(t, e.cluster, streamB, l)
	}
	from := time.Now()
	r := e.start(nil)
	require.NoError(t, r.waitPoll(from))
	e.cw.Put(t, e.group, streamA, events(t0.Add(30*time.Minute), lines[2*q:3*q]))
	for _, l := range lines[2*q : 3*q] {
		want.Add(t, e.cluster, streamA, l)
	}
	r.pollNow()
	// B's events of ten minutes after t0 arrive now, 20 minutes behind
	// A's newest.
	e.cw.Put(t, e.group, streamB, events(t0.Add(10*time.Minute), lines[3*q:]))
	for _, l := range lines[3*q:] {
		want.Add(t, e.cluster, streamB, l)
	}
	r.pollNow()
	e.requireCounts(want)
	require.Equal(t, len(lines), r.events(eventNew))
	require.Zero(t, r.late(), "B is behind A, not behind itself")
}
