package app_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

func TestSinceWindowAndUserFilter(t *testing.T) {
	s := start(t, testConfig(t))
	s.postCaptured("/audit/webhook/master-0")
	// A weekly CronJob's client, three days ago: outside last24h.
	code, _ := s.post("/audit/webhook/master-0", "application/json", eventList(
		ev("weekly-1", "requestReceivedTimestamp", "2026-11-18T03:00:00Z", "user", map[string]any{"username": "system:serviceaccount:batch:weekly"}),
		ev("weekly-2", "requestReceivedTimestamp", "2026-11-18T03:00:01Z", "user", map[string]any{"username": "system:serviceaccount:batch:weekly"}),
	))
	require.Equal(t, 200, code)

	day := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(35), day.Status.RequestCount)
	require.Nil(t, day.Status.Window)

	week := getAPI(t, s, "endpoints.v1?since=168h&users=2")
	require.Equal(t, int64(35), week.Status.RequestCount, "requestCount stays the 24h sum")
	require.Equal(t, &sunsetv1.Window{Since: "168h0m0s", From: testNow.Add(-168 * time.Hour).Truncate(time.Hour),
		RequestCount: 37, SystemRequestCount: 27, ClientCount: 5, SystemClientCount: 1,
		ByUser: []sunsetv1.WindowUser{
			{UserName: "system:apiserver", RequestCount: 27, System: true, UserAgents: []string{"kube-apiserver/v1.36.3"}, LastSeen: capturedHour},
			{UserName: "alice", RequestCount: 6, UserAgents: []string{"kubectl/v1.32.4"}, LastSeen: capturedHour},
		}}, week.Status.Window)
	weekly := getAPI(t, s, "endpoints.v1?since=168h&users=100")
	require.Equal(t, []sunsetv1.WindowUser{{UserName: "system:serviceaccount:batch:weekly", RequestCount: 2, UserAgents: []string{"kubectl/v1.32.4"}, LastSeen: time.Date(2026, 11, 18, 3, 0, 0, 0, time.UTC)}},
		weeklyUser(weekly.Status.Window.ByUser), "lastSeen is the hour of the newest call")

	require.Equal(t, []string{}, listNames(t, s, "?user=system:serviceaccount:batch:weekly"))
	require.Equal(t, []string{"endpoints.v1"}, listNames(t, s, "?user=system:serviceaccount:batch:weekly&since=96h"))
	require.Equal(t, []string{"endpoints.v1", "widgets.v1alpha1.e2e.example.com", "widgets.v1beta1.e2e.example.com"}, listNames(t, s, "?user=bob"))
}

// capturedHour is the hour of the captured bodies' requests.
var capturedHour = time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)

func weeklyUser(users []sunsetv1.WindowUser) []sunsetv1.WindowUser {
	var out []sunsetv1.WindowUser
	for _, u := range users {
		if u.UserName == "system:serviceaccount:batch:weekly" {
			out = append(out, u)
		}
	}
	return out
}
