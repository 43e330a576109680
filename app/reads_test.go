package app_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
)

// A cluster whose audit policy logs no reads is warned about a day after
// it was first heard, even when Sunset restarted in between (an update,
// a crash loop): /-/ready?verbose and sunset_cluster_reads_missing say so
// one hour after a restart that came 23 hours in.
func TestReadsMissingWarningSurvivesRestart(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UTC().Truncate(time.Hour).UnixNano())
	at := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	withClock := func(o *app.Options) { o.Now = at }
	s := startWith(t, testConfig(t), withClock)
	send := func(s *server, cluster, id, verb string) {
		t.Helper()
		stamp := at().Add(-time.Second).Format(time.RFC3339Nano)
		body := eventList(ev(id, "verb", verb, "objectRef", map[string]any{"resource": "configmaps", "namespace": "default", "apiVersion": "v1"},
			"annotations", nil, "requestReceivedTimestamp", stamp, "stageTimestamp", stamp))
		code, b := s.post("/audit/webhook/"+cluster+"/master-0", "application/json", body)
		require.Equal(t, http.StatusOK, code, string(b))
	}
	send(s, "admin-only", "w-0", "create")
	send(s, "full", "r-0", "list")
	clock.Add(int64(23 * time.Hour))
	send(s, "admin-only", "w-23", "create")
	send(s, "full", "r-23", "list")
	s.stop()

	s = startWith(t, s.cfg, withClock)
	clock.Add(int64(time.Hour))
	send(s, "admin-only", "w-24", "update")
	send(s, "full", "r-24", "get")
	code, ready := s.get("/-/ready?verbose")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "Sunset is ready.\nwarning: cluster admin-only sent no get, list or watch in 24h: its reads are not logged, so deprecated reads cannot be seen (see inputs/managed.md#reads)\n", string(ready))
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_cluster_reads_missing 1 when a cluster has sent events for a day and not one get, list or watch: its audit policy or log category drops reads, so deprecated reads cannot be seen.
# TYPE sunset_cluster_reads_missing gauge
sunset_cluster_reads_missing{cluster="admin-only"} 1
sunset_cluster_reads_missing{cluster="full"} 0
`), "sunset_cluster_reads_missing"))
}
