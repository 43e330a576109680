package app_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// ?dryRun=All on the webhook classifies everything and stores nothing,
// across a restart too.
func TestWebhookDryRunStoresNothing(t *testing.T) {
	s := start(t, testConfig(t))
	bodies := capturedBodies(t)
	code, resp := s.post("/audit/webhook/master-0?dryRun=All", "application/json", bodies[7])
	require.Equal(t, 200, code)
	// Body 00008: three system:apiserver requests to endpoints, their
	// RequestReceived events, and a lease delete that is not deprecated.
	require.JSONEq(t, `{"cluster":"default","node":"master-0","counted":3,"duplicates":0,"skipped":5,"skippedBy":{"not_deprecated":1,"skipped_stage":4},"invalid":0,"dryRun":true,"events":[
		{"auditID":"dae37ffe-72f2-45b6-b146-1e17fd344a53","result":"skipped_stage"},
		{"auditID":"dae37ffe-72f2-45b6-b146-1e17fd344a53","result":"counted","api":"endpoints.v1","hour":"2026-11-21T19:00:00Z","node":"master-0","username":"system:apiserver","userAgent":"kube-apiserver/v1.36.3","verb":"get"},
		{"auditID":"4267644c-5519-4b93-ba20-8819998058e1","result":"skipped_stage"},
		{"auditID":"4267644c-5519-4b93-ba20-8819998058e1","result":"counted","api":"endpoints.v1","hour":"2026-11-21T19:00:00Z","node":"master-0","username":"system:apiserver","userAgent":"kube-apiserver/v1.36.3","verb":"create"},
		{"auditID":"2662c7fd-f65c-4e13-a868-c323235baeeb","result":"skipped_stage"},
		{"auditID":"2662c7fd-f65c-4e13-a868-c323235baeeb","result":"not_deprecated"},
		{"auditID":"14328606-c3c3-42d5-981f-aa7236f1b467","result":"skipped_stage"},
		{"auditID":"14328606-c3c3-42d5-981f-aa7236f1b467","result":"counted","api":"endpoints.v1","hour":"2026-11-21T19:00:00Z","node":"master-0","username":"system:apiserver","userAgent":"kube-apiserver/v1.36.3","verb":"get"}]}`, string(resp))
	for _, b := range bodies {
		code, _ := s.post("/audit/webhook/master-0?dryRun=All", "application/json", b)
		require.Equal(t, 200, code)
	}
	require.Equal(t, []string{}, listNames(t, s, ""))
	s = s.restart()
	require.Equal(t, []string{}, listNames(t, s, ""))

	// After a real delivery a dry run finds only duplicates.
	require.Equal(t, capturedDeprecated, s.postCaptured("/audit/webhook/master-0"))
	code, resp = s.post("/audit/webhook/master-0?dryRun=All", "application/json", bodies[3])
	require.Equal(t, 200, code)
	require.Contains(t, string(resp), `"counted": 0,`)
	require.Contains(t, string(resp), `"duplicates": 27,`)

	code, resp = s.post("/audit/webhook/master-0?dryRun=true", "application/json", bodies[0])
	require.Equal(t, 400, code)
	require.JSONEq(t, statusBody(400, "BadRequest", `dryRun "true" is not valid; the only valid value is All`), string(resp))
}

func TestDeleteResetsAnAPI(t *testing.T) {
	s := start(t, testConfig(t))
	s.postCaptured("/audit/webhook/master-0")
	del := func(path string) (int, []byte) {
		req, err := http.NewRequest(http.MethodDelete, s.url+"/apis/sunset.dev/v1/apirequestcounts/"+path, nil)
		require.NoError(t, err)
		return s.do(req)
	}
	code, body := del("endpoints.v1?dryRun=All")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"kind":"Status","apiVersion":"v1","status":"Success","dryRun":true,"details":{"name":"endpoints.v1","group":"sunset.dev","kind":"apirequestcounts","clusters":{"default":35}}}`, string(body))
	require.Equal(t, int64(35), getAPI(t, s, "endpoints.v1").Status.RequestCount, "a dry run deletes nothing")

	code, body = del("endpoints.v1")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"kind":"Status","apiVersion":"v1","status":"Success","details":{"name":"endpoints.v1","group":"sunset.dev","kind":"apirequestcounts","clusters":{"default":35}}}`, string(body))
	code, _ = s.get("/apis/sunset.dev/v1/apirequestcounts/endpoints.v1")
	require.Equal(t, 404, code)

	// Re-sent old events stay duplicates: the reset is not undone.
	require.Equal(t, 0, s.postCaptured("/audit/webhook/master-0"))
	s = s.restart()
	require.Equal(t, []string{"componentstatuses.v1", "widgets.v1alpha1.e2e.example.com", "widgets.v1beta1.e2e.example.com"}, listNames(t, s, ""))

	code, body = del("endpoints.v1")
	require.Equal(t, 404, code)
	require.JSONEq(t, notFoundBody("apirequestcounts", "endpoints.v1", "nothing to delete"), string(body))
	code, body = del("componentstatuses.v1?dryRun=yes&force=1")
	require.Equal(t, 400, code)
	require.JSONEq(t, statusBody(400, "BadRequest", `dryRun "yes" is not valid; the only valid value is All; unknown parameter "force" (known: cluster, dryRun)`), string(body))
	require.Equal(t, int64(2), getAPI(t, s, "componentstatuses.v1").Status.RequestCount)
}
