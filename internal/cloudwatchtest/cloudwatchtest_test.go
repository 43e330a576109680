package cloudwatchtest

import (
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
