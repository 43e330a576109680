package app_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// The deprecated-API counter and window gauge after the captured traffic,
// sent twice: duplicates change nothing. Values checked by hand against
// client-output.txt (system:apiserver is system traffic).
func TestDeprecatedAPIMetricsAfterCapturedTraffic(t *testing.T) {
	s := start(t, testConfig(t))
	require.Equal(t, capturedDeprecated, s.postCaptured("/audit/webhook/master-0"))
	require.Equal(t, 0, s.postCaptured("/audit/webhook/master-0"))

	series := func(name string) string {
		var b strings.Builder
		// The dry runs: alice's dry-run create of endpoints, alice's and
		// bob's dry-run creates of widgets and bob's dry-run delete.
		for _, row := range []struct {
			dry, group, version, resource, verb, system string
			n                                           int
		}{
			{"false", "", "v1", "componentstatuses", "list", "false", 2},
			{"false", "", "v1", "endpoints", "create", "false", 1},
			{"false", "", "v1", "endpoints", "create", "true", 13},
			{"false", "", "v1", "endpoints", "delete", "false", 1},
			{"false", "", "v1", "endpoints", "get", "false", 3},
			{"false", "", "v1", "endpoints", "get", "true", 14},
			{"false", "", "v1", "endpoints", "list", "false", 2},
			{"false", "e2e.example.com", "v1alpha1", "widgets", "list", "false", 1},
			{"false", "e2e.example.com", "v1beta1", "widgets", "create", "false", 3},
			{"false", "e2e.example.com", "v1beta1", "widgets", "delete", "false", 2},
			{"false", "e2e.example.com", "v1beta1", "widgets", "get", "false", 9},
			{"false", "e2e.example.com", "v1beta1", "widgets", "list", "false", 5},
			{"false", "e2e.example.com", "v1beta1", "widgets", "patch", "false", 2},
			{"false", "e2e.example.com", "v1beta1", "widgets", "update", "false", 2},
			{"false", "e2e.example.com", "v1beta1", "widgets", "watch", "false", 2},
			{"true", "", "v1", "endpoints", "create", "false", 1},
			{"true", "e2e.example.com", "v1beta1", "widgets", "create", "false", 2},
			{"true", "e2e.example.com", "v1beta1", "widgets", "delete", "false", 1},
		} {
			b.WriteString(name + `{cluster="default",dry_run="` + row.dry + `",group="` + row.group + `",removed_release="",resource="` + row.resource +
				`",state="deprecated",subresource="",system="` + row.system + `",verb="` + row.verb + `",version="` + row.version + `"} ` + strconv.Itoa(row.n) + "\n")
		}
		return b.String()
	}
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_deprecated_requests_total Requests to deprecated or removed APIs counted since start (duplicates excluded). state is deprecated or removed (the client got a 404).
# TYPE sunset_deprecated_requests_total counter
`+series("sunset_deprecated_requests_total")+`
# HELP sunset_deprecated_requests Requests to deprecated or removed APIs in the sliding window (metrics.window, default 24h). Falls to 0 when an API stops being used; the series disappears after metrics.grace.
# TYPE sunset_deprecated_requests gauge
`+series("sunset_deprecated_requests")), "sunset_deprecated_requests_total", "sunset_deprecated_requests"))
}
