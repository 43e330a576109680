package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
)

// Validate turns flags into the query the API is asked, or names every bad
// flag at once.
func TestRequestsValidate(t *testing.T) {
	day := Filters{Cluster: "prod", User: "bob", Since: 48 * time.Hour, ExcludeSystem: true}
	list := ListRequest{Filters: day, Output: "wide", RemovedIn: "1.37", RemovedBefore: "v1.38.2", State: "removed"}
	require.NoError(t, list.Validate())
	require.Equal(t, sunsetv1.Query{Users: sunsetv1.MaxUsersToReport, Cluster: "prod", User: "bob", Since: 48 * time.Hour, State: "removed",
		RemovedIn: catalog.Release{Major: 1, Minor: 37}, RemovedBefore: catalog.Release{Major: 1, Minor: 38}}, list.query)
	require.Equal(t, formatWide, list.format)
	require.Nil(t, list.printer)

	named := ListRequest{Filters: day, Output: "name"}
	require.NoError(t, named.Validate())
	require.NotNil(t, named.printer, "-o name prints through kubectl's printer")
	require.True(t, named.objects())

	check := CheckRequest{Filters: day, TargetVersion: "v1.37.0", Output: "json"}
	require.NoError(t, check.Validate())
	require.Equal(t, catalog.Release{Major: 1, Minor: 37}, check.target)

	webhooks := WebhooksRequest{Since: 24 * time.Hour, Class: "critical", Output: "yaml", Cluster: "prod"}
	require.NoError(t, webhooks.Validate())
	require.Equal(t, formatYAML, webhooks.format)
	require.Equal(t, "prod", webhooks.query.Cluster)

	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"list", &ListRequest{Filters: Filters{Since: 30 * time.Minute}, Output: "csv", RemovedIn: "soon", RemovedBefore: "2", State: "gone"},
			"-o \"csv\" is not one of table, wide, json, yaml\n--since 30m0s is shorter than 1h; counts are hourly\n" +
				"--removed-in: \"soon\" is not a Kubernetes release such as 1.37\n--removed-before: \"2\" is not a Kubernetes release such as 1.37\n" +
				"--state \"gone\" is not one of deprecated, removed"},
		{"jsonpath without a template", &ListRequest{Filters: day, Output: "jsonpath="},
			"-o jsonpath needs a template, e.g. -o jsonpath='{.items[*].metadata.name}'"},
		{"check", &CheckRequest{Filters: Filters{Since: time.Minute}, TargetVersion: "next", Output: "yaml"},
			"--target-version: \"next\" is not a Kubernetes release such as 1.37\n--since 1m0s is shorter than 1h; counts are hourly\n-o \"yaml\" is not one of text, json"},
		{"check's clean-for and from", &CheckRequest{Filters: day, TargetVersion: "1.37", Output: "text", CleanFor: 90 * time.Minute, From: "1.37"},
			"--clean-for 1h30m is not whole hours; counts are hourly (1h or 2h)\n--from 1.37 is not before --target-version 1.37"},
		{"since in minutes", &ListRequest{Filters: Filters{Since: 90 * time.Minute}},
			"--since 1h30m is not whole hours; counts are hourly (1h or 2h)"},
		{"webhooks since in minutes", &WebhooksRequest{Since: 25*time.Hour + time.Minute},
			"--since 25h1m is not whole hours; counts are hourly (25h or 26h)"},
		{"webhooks", &WebhooksRequest{Since: 0, Class: "x", Output: "name"},
			"-o \"name\" is not one of table, wide, json, yaml\n--since 0s is shorter than 1h; counts are hourly\n--class \"x\" is not one of critical, security, virtual"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.EqualError(t, tc.req.Validate(), tc.want)
		})
	}
}
