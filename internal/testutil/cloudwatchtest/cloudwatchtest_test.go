package cloudwatchtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
)

// What a test puts comes back through the proxy, page by page, to the real
// SDK; a fault is answered in AWS's form and counted as a call.
func TestServer(t *testing.T) {
	s := Start(t)
	const group = "/aws/eks/c/cluster"
	start := time.Now().Add(-time.Minute)
	s.Put(t, group, Stream("a"), Lines(start, "one", "two", "three"))
	s.Put(t, group, "authenticator-a", Lines(start, strings.Repeat("x", 300<<10)))

	c := s.Client()
	var got []string
	pages := cloudwatchlogs.NewFilterLogEventsPaginator(c, &cloudwatchlogs.FilterLogEventsInput{
		LogGroupName: aws.String(group), StartTime: aws.Int64(start.UnixMilli()), Limit: aws.Int32(2)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(t.Context())
		require.NoError(t, err)
		for _, e := range out.Events {
			got = append(got, aws.ToString(e.LogStreamName)+":"+aws.ToString(e.Message)[:min(5, len(aws.ToString(e.Message)))])
		}
	}
	require.ElementsMatch(t, []string{"kube-apiserver-audit-a:one", "kube-apiserver-audit-a:two", "kube-apiserver-audit-a:three", "authenticator-a:xxxxx"}, got)
	calls := s.Calls("FilterLogEvents")
	require.Equal(t, 2, calls, "two pages")

	s.Fail("FilterLogEvents", 1, AccessDenied("FilterLogEvents", group))
	_, err := c.FilterLogEvents(t.Context(), &cloudwatchlogs.FilterLogEventsInput{LogGroupName: aws.String(group)})
	var api smithy.APIError
	require.ErrorAs(t, err, &api)
	require.Equal(t, "AccessDeniedException", api.ErrorCode())
	require.Contains(t, api.ErrorMessage(), "arn:aws:logs:us-east-1:123456789012:log-group:/aws/eks/c/cluster:log-stream:")
	_, err = c.FilterLogEvents(t.Context(), &cloudwatchlogs.FilterLogEventsInput{LogGroupName: aws.String(group)})
	require.NoError(t, err, "one fault only")
	require.Equal(t, calls+2, s.Calls("FilterLogEvents"))

	require.Contains(t, s.Env(), "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS="+s.URL)
}

// Put refuses an event time outside the window, before asking moto, so
// that a test with fixed times (a capture's) fails at once, saying why,
// rather than two weeks after they were written; and moto does refuse
// times outside PutLogEvents' window, which put reports.
func TestPutRefusesTimesOutsideTheWindow(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"now", now, true},
		{"just inside 13 days back", now.Add(-maxAge + time.Minute), true},
		{"just inside an hour ahead", now.Add(maxAhead - time.Minute), true},
		{"over 13 days back", now.Add(-maxAge - time.Minute), false},
		{"over an hour ahead", now.Add(maxAhead + time.Minute), false},
	} {
		err := checkWindow(now, []Event{{Time: now.Add(-time.Minute)}, {Time: c.at}})
		if c.ok {
			require.NoError(t, err, c.name)
			continue
		}
		require.Error(t, err, c.name)
		require.Contains(t, err.Error(), "event 1 of 2 has the CloudWatch time "+c.at.UTC().Format(time.RFC3339Nano), c.name)
		require.Contains(t, err.Error(), "derive the times put from time.Now()", c.name)
	}

	s := Start(t)
	const group = "/aws/eks/c/cluster"
	ft := fatalTB{t}
	msg := fatalOf(func() { s.Put(ft, group, Stream("a"), Lines(now.Add(-maxAge-time.Hour), "old")) })
	require.Contains(t, msg, "cloudwatchtest: putting to /aws/eks/c/cluster/kube-apiserver-audit-a: event 0 of 1 has the CloudWatch time")
	require.Contains(t, msg, "before the real clock")
	msg = fatalOf(func() { s.Put(ft, group, Stream("a"), Lines(now.Add(maxAhead+time.Minute), "ahead")) })
	require.Contains(t, msg, "after the real clock")
	require.Zero(t, s.Calls("CreateLogGroup")+s.Calls("CreateLogStream")+s.Calls("PutLogEvents"), "refused before moto was asked")

	// Past the guard, moto refuses them itself.
	s.CreateStream(t, group, Stream("a"))
	msg = fatalOf(func() { s.put(ft, group, Stream("a"), Lines(now.Add(-15*24*time.Hour), "too old")) })
	require.Contains(t, msg, "rejected events (too old before index 0")
	msg = fatalOf(func() { s.put(ft, group, Stream("a"), Lines(now.Add(3*time.Hour), "too new")) })
	require.Contains(t, msg, "too new from index 0")
}

// fatalTB turns Fatal into a panic that fatalOf recovers, so that a test
// can see how a helper fails; everything else goes to the real test.
type fatalTB struct{ testing.TB }

type fatal string

func (fatalTB) Fatalf(format string, args ...any) { panic(fatal(fmt.Sprintf(format, args...))) }
func (fatalTB) Fatal(args ...any)                 { panic(fatal(fmt.Sprint(args...))) }

// fatalOf runs f and returns the message it failed with, or "".
func fatalOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			m, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			msg = string(m)
		}
	}()
	f()
	return ""
}
