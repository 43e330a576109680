package eks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/cloudwatchtest"
)

// Calls over the account's quota are retried by the SDK's adaptive mode
// within the poll, and show in sunset_eks_requests_total as throttled,
// not as errors.
func TestThrottledCallsAreRetriedAndCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lines := countingLines(t)
	e.cw.Put(t, e.group, streamA, events(time.Now().Add(-10*time.Minute), lines))
	want := e.independent(streamA, lines...)
	e.cw.Fail("FilterLogEvents", 1, cloudwatchtest.Throttling())
	from := time.Now()
	r := e.start(nil)
	require.NoError(t, r.waitPoll(from), "the SDK retried the throttled calls")
	e.requireCounts(want)
	require.Equal(t, 1, r.requests(opFilterLogEvents, requestThrottled))
	require.Zero(t, r.requests(opFilterLogEvents, requestError))
	pages := (len(lines) + 19) / 20
	require.Equal(t, pages, r.requests(opFilterLogEvents, requestOK))
	require.Equal(t, pages+1, e.cw.Calls("FilterLogEvents"))
	ok, why := r.src.Ready()
	require.True(t, ok, why)
}

// Until a poll succeeds, and once polls keep failing, Ready says no, with
// what to do: here, the policy Sunset's role lacks, named by the ARN that
// AWS's message gives. The source keeps trying, and is ready once access
// is granted.
func TestReadyExplainsAccessDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lines := countingLines(t)
	e.cw.Put(t, e.group, streamA, events(time.Now().Add(-10*time.Minute), lines))
	want := e.independent(streamA, lines...)
	e.cw.Fail("FilterLogEvents", -1, cloudwatchtest.AccessDenied("FilterLogEvents", e.group))
	const why = "eks eks-test: FilterLogEvents on /aws/eks/eks-test/cluster: access denied; grant logs:DescribeLogStreams and logs:FilterLogEvents on " +
		"arn:aws:logs:us-east-1:123456789012:log-group:/aws/eks/eks-test/cluster:* to the role Sunset runs as (IRSA or EKS Pod Identity)"
	// Polls only when woken, so that the failures are counted exactly.
	r := e.start(func(o *Options, k *knobs, _ func()) { k.retryStart = time.Hour })
	require.Error(t, r.waitPoll(time.Time{}))
	ok, got := r.src.Ready()
	require.False(t, ok)
	require.Equal(t, why, got, "not ready before a first success")
	for range failuresUntilNotReady - 1 {
		from := time.Now()
		r.src.knobs.wake <- struct{}{}
		require.Error(t, r.waitPoll(from))
	}
	ok, got = r.src.Ready()
	require.False(t, ok)
	require.Equal(t, why+" (3 polls in a row failed)", got)
	require.Equal(t, failuresUntilNotReady, r.requests(opFilterLogEvents, requestError), "access denied is not retried within a poll")

	e.cw.Clear("FilterLogEvents")
	r.pollNow()
	ok, got = r.src.Ready()
	require.True(t, ok, got)
	e.requireCounts(want)
}

// A log group that does not exist (the cluster's audit logging is off) is
// explained; once it exists, the source reads it.
func TestReadyExplainsAMissingLogGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.start(func(o *Options, k *knobs, _ func()) { k.retryStart = time.Hour })
	require.Error(t, r.waitPoll(time.Time{}))
	ok, why := r.src.Ready()
	require.False(t, ok)
	require.Equal(t, "eks eks-test: DescribeLogStreams on /aws/eks/eks-test/cluster: the log group does not exist in us-east-1; "+
		"turn on the audit log type of the EKS cluster's control-plane logging, or set eks.logGroup and eks.region to where it is", why)

	lines := countingLines(t)
	e.cw.Put(t, e.group, streamA, events(time.Now().Add(-10*time.Minute), lines))
	r.pollNow()
	ok, why = r.src.Ready()
	require.True(t, ok, why)
	e.requireCounts(e.independent(streamA, lines...))
}
