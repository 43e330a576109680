package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// With the read API keeping what queries read (query-cache-bytes, on by
// default), every answer still counts every request posted before it:
// of the current hour, and late ones of an earlier hour.
func TestQueriesSeeEveryCountWhileViewsAreKept(t *testing.T) {
	cfg := testConfig(t)
	require.NotZero(t, cfg.QueryCacheBytes)
	s := start(t, cfg)
	post := func(events ...map[string]any) {
		t.Helper()
		code, body := s.post("/audit/webhook/master-0", "application/json", eventList(events...))
		require.Equal(t, 200, code, body)
	}
	post(ev("a"))
	require.Equal(t, int64(1), getAPI(t, s, "endpoints.v1").Status.RequestCount)
	require.Equal(t, int64(1), getAPI(t, s, "endpoints.v1").Status.RequestCount)
	post(ev("b"), ev("c"))
	require.Equal(t, int64(3), getAPI(t, s, "endpoints.v1").Status.RequestCount)
	post(ev("late", "requestReceivedTimestamp", "2026-11-21T17:10:00.000001Z", "stageTimestamp", "2026-11-21T17:10:00.020001Z"))
	obj := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(4), obj.Status.RequestCount)
	require.Equal(t, int64(1), obj.Status.Last24h[17].RequestCount)
	require.Equal(t, int64(3), obj.Status.Last24h[19].RequestCount)
}
