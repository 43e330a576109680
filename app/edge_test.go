package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

func TestStagesAndEdgeCases(t *testing.T) {
	cfg := testConfig(t)
	s := start(t, cfg)
	cs := map[string]any{"resource": "componentstatuses", "apiVersion": "v1"}
	widgets := map[string]any{"resource": "widgets", "apiGroup": "e2e.example.com", "apiVersion": "v1beta1"}
	vac := map[string]any{"resource": "volumeattributesclasses", "apiGroup": "storage.k8s.io", "apiVersion": "v1beta1"}
	deprecatedRemoved := map[string]any{"k8s.io/deprecated": "true", "k8s.io/removed-release": "1.37"}

	body := eventList(
		// Only the final stage counts, even if an earlier one (wrongly)
		// carried the annotation.
		ev("rr", "stage", "RequestReceived"),
		ev("watch-1", "stage", "ResponseStarted", "verb", "watch"),
		ev("watch-1", "stage", "ResponseComplete", "verb", "watch"),
		ev("panic-1", "stage", "Panic", "verb", "get"),
		// Not deprecated, and a 403 (never annotated).
		ev("plain", "annotations", map[string]any{"authorization.k8s.io/decision": "allow"}),
		ev("forbidden", "annotations", nil, "responseStatus", map[string]any{"code": 403}),
		// No objectRef: a non-resource URL cannot be a deprecated API.
		ev("nonresource", "objectRef", nil, "requestURI", "/healthz"),
		// Timestamps: stageTimestamp when requestReceivedTimestamp is
		// missing; the arrival hour when both are.
		ev("late", "objectRef", cs, "requestReceivedTimestamp", nil, "stageTimestamp", "2026-11-21T18:59:59.999999Z"),
		ev("notime", "objectRef", cs, "requestReceivedTimestamp", nil, "stageTimestamp", nil),
		// The removed release, a subresource, a full user agent cut at
		// the first space, and a username with a NUL byte.
		ev("vac-1", "objectRef", vac, "annotations", deprecatedRemoved, "verb", "create", "userAgent", "terraform/1.9.0 (+https://www.terraform.io)"),
		ev("sub-1", "objectRef", map[string]any{"resource": "widgets", "apiGroup": "e2e.example.com", "apiVersion": "v1beta1", "subresource": "status"}, "verb", "patch",
			"user", map[string]any{"username": "evil\x00user"}),
		ev("wd-1", "objectRef", widgets, "verb", "get", "userAgent", strings.Repeat("é", 600)),
		// A request is counted once even if the list repeats it.
		ev("wd-1", "objectRef", widgets, "verb", "get", "userAgent", strings.Repeat("é", 600)),
	)
	code, resp := s.post("/audit/webhook/prod/apiserver-2", "application/json", body)
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"cluster":"prod","node":"apiserver-2","counted":7,"duplicates":1,"skipped":5,"skippedBy":{"no_object_ref":1,"not_deprecated":2,"skipped_stage":2},"invalid":0}`, string(resp))

	// A single Event body, kind and apiVersion set, node from the peer address.
	single := ev("single-1", "kind", "Event", "apiVersion", "audit.k8s.io/v1", "verb", "delete")
	code, resp = s.post("/audit/webhook", "application/json", mustJSON(single))
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"cluster":"default","node":"127.0.0.1","counted":1,"duplicates":0,"skipped":0,"invalid":0}`, string(resp))

	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(3), ep.Status.RequestCount)
	requireNodes(t, ep.Status.Last24h[19], `[
		{"nodeName":"127.0.0.1","cluster":"default","requestCount":1,"byUser":[{"username":"alice","userAgent":"kubectl/v1.32.4","requestCount":1,"byVerb":[{"verb":"delete","requestCount":1}]}]},
		{"nodeName":"apiserver-2","cluster":"prod","requestCount":2,"byUser":[{"username":"alice","userAgent":"kubectl/v1.32.4","requestCount":2,"byVerb":[{"verb":"get","requestCount":1},{"verb":"watch","requestCount":1}]}]}]`)

	cstat := getAPI(t, s, "componentstatuses.v1")
	require.Equal(t, int64(2), cstat.Status.RequestCount)
	require.Equal(t, int64(1), cstat.Status.Last24h[18].RequestCount)
	require.Equal(t, int64(1), cstat.Status.Last24h[19].RequestCount)
	require.Empty(t, cstat.Status.RemovedInRelease)

	v := getAPI(t, s, "volumeattributesclasses.v1beta1.storage.k8s.io")
	require.Equal(t, "1.37", v.Status.RemovedInRelease)
	require.Equal(t, "terraform/1.9.0", v.Status.CurrentHour.ByNode[0].ByUser[0].UserAgent)

	w := getAPI(t, s, "widgets.v1beta1.e2e.example.com")
	require.Equal(t, int64(2), w.Status.RequestCount)
	users := w.Status.CurrentHour.ByNode[0].ByUser
	require.Len(t, users, 2)
	require.Equal(t, strings.Repeat("é", 512), users[0].UserAgent, "user agent is cut to 1024 bytes on a character boundary")
	require.Equal(t, "evil\x00user", users[1].UserName)
	require.Equal(t, []sunsetv1.PerVerbAPIRequestCount{{Verb: "patch", RequestCount: 1}}, users[1].ByVerb)

	// Every other hour lists the API's two apiservers, idle, as OpenShift
	// does; and the list holds exactly these APIs.
	idle := sunsetv1.PerResourceAPIRequestLog{ByNode: []sunsetv1.PerNodeAPIRequestLog{
		{NodeName: "127.0.0.1", Cluster: "default", ByUser: []sunsetv1.PerUserAPIRequestCount{}},
		{NodeName: "apiserver-2", Cluster: "prod", ByUser: []sunsetv1.PerUserAPIRequestCount{}},
	}}
	for i, h := range ep.Status.Last24h {
		if i != 19 {
			require.Equal(t, idle, h, "hour %d", i)
		}
	}
	code, listBody := s.get("/apis/sunset.dev/v1/apirequestcounts")
	require.Equal(t, 200, code)
	var list sunsetv1.APIRequestCountList
	require.NoError(t, json.Unmarshal(listBody, &list))
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	require.Equal(t, []string{"componentstatuses.v1", "endpoints.v1", "volumeattributesclasses.v1beta1.storage.k8s.io", "widgets.v1beta1.e2e.example.com"}, names)

	// The cluster filter.
	code, listBody = s.get("/apis/sunset.dev/v1/apirequestcounts/endpoints.v1?cluster=default")
	require.Equal(t, 200, code)
	var one sunsetv1.APIRequestCount
	require.NoError(t, json.Unmarshal(listBody, &one))
	require.Equal(t, int64(1), one.Status.RequestCount)
}

func TestUserAgentFull(t *testing.T) {
	cfg := testConfig(t)
	cfg.UserAgent = "full"
	s := start(t, cfg)
	code, _ := s.post("/audit/webhook/n1", "application/json", eventList(ev("a")))
	require.Equal(t, 200, code)
	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, "kubectl/v1.32.4 (linux/amd64) kubernetes/abcdef", ep.Status.CurrentHour.ByNode[0].ByUser[0].UserAgent)
}

func TestOldAndFutureEventsAreSkipped(t *testing.T) {
	s := start(t, testConfig(t))
	body := eventList(
		ev("old", "requestReceivedTimestamp", "2026-10-01T10:00:00Z"), // past the 30-day retention
		ev("future", "requestReceivedTimestamp", "2026-11-23T10:00:00Z"),
		ev("yesterday", "requestReceivedTimestamp", "2026-11-20T20:00:00Z"), // index 20, in the window
		ev("two-days", "requestReceivedTimestamp", "2026-11-19T20:00:00Z"),  // stored, outside the 24h window
	)
	code, resp := s.post("/audit/webhook/n1", "application/json", body)
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"cluster":"default","node":"n1","counted":2,"duplicates":0,"skipped":2,"skippedBy":{"expired":1,"future":1},"invalid":0}`, string(resp))
	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(1), ep.Status.RequestCount)
	require.Equal(t, int64(1), ep.Status.Last24h[20].RequestCount)
	require.Equal(t, int64(0), ep.Status.CurrentHour.RequestCount)
}

func TestQueryParameters(t *testing.T) {
	s := start(t, testConfig(t))
	s.postCaptured("/audit/webhook/master-0")
	tests := []struct {
		path string
		code int
		want string
	}{
		{"/apis/sunset.dev/v1/apirequestcounts?users=-1", 400, statusBody(400, "BadRequest", "users must be a whole number from 0 to 100 (0 means the default, 10)")},
		{"/apis/sunset.dev/v1/apirequestcounts?users=101", 400, statusBody(400, "BadRequest", "users must be a whole number from 0 to 100 (0 means the default, 10)")},
		{"/apis/sunset.dev/v1/apirequestcounts/endpoints.v1?users=ten", 400, statusBody(400, "BadRequest", "users must be a whole number from 0 to 100 (0 means the default, 10)")},
		{"/apis/sunset.dev/v1/apirequestcounts?usr=bob", 400, statusBody(400, "BadRequest", `unknown parameter "usr" (known: cluster, hourly, removedBefore, removedRelease, since, state, user, users)`)},
		{"/apis/sunset.dev/v1/apirequestcounts?since=30m", 400, statusBody(400, "BadRequest", `since "30m" is not a duration of at least 1h, such as 24h or 168h`)},
		{"/apis/sunset.dev/v1/apirequestcounts?since=8760h", 400, statusBody(400, "BadRequest", `since 8760h0m0s is longer than the retention of 720h0m0s`)},
		{"/apis/sunset.dev/v1/apirequestcounts/deployments.v1beta1.extensions", 404, notFoundBody("apirequestcounts", "deployments.v1beta1.extensions", "no deprecated requests to it were recorded")},
		{"/apis/sunset.dev/v1/apirequestcounts/endpoints.v1?cluster=prod", 404, notFoundBody("apirequestcounts", "endpoints.v1", `no deprecated requests to it were recorded in cluster "prod"`)},
	}
	for _, tc := range tests {
		code, body := s.get(tc.path)
		require.Equal(t, tc.code, code, tc.path)
		require.JSONEq(t, tc.want, string(body), tc.path)
	}
	// OpenShift reads users=0 as its default of 10.
	zero, byDefault := getAPI(t, s, "endpoints.v1?users=0"), getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(10), zero.Spec.NumberOfUsersToReport)
	require.Equal(t, byDefault, zero)

	obj := getAPI(t, s, "endpoints.v1?users=1")
	require.Equal(t, int64(1), obj.Spec.NumberOfUsersToReport)
	node := obj.Status.CurrentHour.ByNode[0]
	require.Equal(t, int64(35), node.RequestCount, "node totals include every user")
	require.Equal(t, []sunsetv1.PerUserAPIRequestCount{{UserName: "system:apiserver", UserAgent: "kube-apiserver/v1.36.3", RequestCount: 27,
		ByVerb: []sunsetv1.PerVerbAPIRequestCount{{Verb: "create", RequestCount: 13}, {Verb: "get", RequestCount: 14}}, System: true}}, node.ByUser)
}

// requireNodes compares the counts of an hour's nodes.
func requireNodes(t *testing.T, hour sunsetv1.PerResourceAPIRequestLog, want string) {
	t.Helper()
	got, err := json.Marshal(hour.ByNode)
	require.NoError(t, err)
	require.JSONEq(t, want, string(got))
}
