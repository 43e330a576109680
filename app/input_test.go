package app_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// ev builds one audit event as kube-apiserver sends it in an EventList, with
// fields overridden by kv pairs (a nil value deletes the field).
func ev(id string, kv ...any) map[string]any {
	e := map[string]any{
		"level":                    "Metadata",
		"auditID":                  id,
		"stage":                    "ResponseComplete",
		"requestURI":               "/api/v1/namespaces/default/endpoints",
		"verb":                     "list",
		"user":                     map[string]any{"username": "alice", "groups": []string{"system:authenticated"}},
		"sourceIPs":                []string{"10.0.0.7"},
		"userAgent":                "kubectl/v1.32.4 (linux/amd64) kubernetes/abcdef",
		"objectRef":                map[string]any{"resource": "endpoints", "namespace": "default", "apiVersion": "v1"},
		"responseStatus":           map[string]any{"metadata": map[string]any{}, "code": 200},
		"requestReceivedTimestamp": "2026-11-21T19:10:00.000001Z",
		"stageTimestamp":           "2026-11-21T19:10:00.020001Z",
		"annotations":              map[string]any{"k8s.io/deprecated": "true", "authorization.k8s.io/decision": "allow"},
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(e, kv[i].(string))
			continue
		}
		e[kv[i].(string)] = kv[i+1]
	}
	return e
}

func eventList(items ...map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": map[string]any{}, "items": items})
	if err != nil {
		panic(err)
	}
	return b
}

func statusBody(code int, reason, message string) string {
	return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":%q,"message":%q,"code":%d}`, reason, message, code)
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

func TestWebhookRejectsBadInput(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBodyBytes = 1 << 20
	s := start(t, cfg)
	oversized := eventList(ev("big", "userAgent", strings.Repeat("x", 1<<20)))
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)

	tests := []struct {
		name, contentType, encoding string
		body                        []byte
		code                        int
		want                        string
	}{
		{"not JSON", "application/json", "", []byte(`{"kind":"EventList",`), 400,
			statusBody(400, "BadRequest", "body is not valid JSON at byte offset 20: unexpected end of JSON input")},
		{"JSON array", "application/json", "", []byte(`[1,2]`), 400,
			statusBody(400, "BadRequest", "body is a JSON array, want an object")},
		{"items not a list", "application/json", "", []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":"x"}`), 400,
			statusBody(400, "BadRequest", `body field "items" is a JSON string, want an array`)},
		{"wrong kind", "application/json", "", []byte(`{"kind":"PodList","apiVersion":"audit.k8s.io/v1","items":[]}`), 400,
			statusBody(400, "BadRequest", `kind "PodList" is not supported; want "EventList" or "Event"`)},
		{"missing kind", "application/json", "", []byte(`{"apiVersion":"audit.k8s.io/v1","items":[]}`), 400,
			statusBody(400, "BadRequest", `kind is missing; want "EventList" or "Event"`)},
		{"v1beta1", "application/json", "", []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1beta1","items":[]}`), 400,
			statusBody(400, "BadRequest", `apiVersion "audit.k8s.io/v1beta1" is not supported; want "audit.k8s.io/v1" (set --audit-webhook-version=audit.k8s.io/v1 on kube-apiserver)`)},
		{"missing apiVersion", "application/json", "", []byte(`{"kind":"EventList","items":[]}`), 400,
			statusBody(400, "BadRequest", `apiVersion is missing; want "audit.k8s.io/v1"`)},
		{"single event with a bad stage type", "application/json", "", []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":7}`), 400,
			statusBody(400, "BadRequest", `event field "stage" is a JSON number, want a string`)},
		{"hostile nesting", "application/json", "", []byte(deep), 400,
			statusBody(400, "BadRequest", "body is not valid JSON at byte offset 10001: invalid character '[' exceeded max depth")},
		{"oversized", "application/json", "", oversized, 413,
			statusBody(413, "RequestEntityTooLarge", "body is larger than the limit of 1048576 bytes; raise max-body-bytes if your events are this large")},
		{"oversized once decompressed", "application/json", "gzip", gzipped(oversized), 413,
			statusBody(413, "RequestEntityTooLarge", "body is larger than the limit of 1048576 bytes; raise max-body-bytes if your events are this large")},
		{"not gzip", "application/json", "gzip", []byte("plain"), 400,
			statusBody(400, "BadRequest", "body is not valid gzip")},
		{"brotli", "application/json", "br", eventList(), 415,
			statusBody(415, "UnsupportedMediaType", `Content-Encoding "br" is not supported; send identity or gzip`)},
		{"form content type", "application/x-www-form-urlencoded", "", eventList(), 415,
			statusBody(415, "UnsupportedMediaType", `Content-Type "application/x-www-form-urlencoded" is not supported; send application/json (curl: -H 'Content-Type: application/json')`)},
		{"no content type", "", "", eventList(), 415,
			statusBody(415, "UnsupportedMediaType", `Content-Type is missing; send application/json (curl: -H 'Content-Type: application/json')`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, s.url+"/audit/webhook/n1", bytes.NewReader(tc.body))
			require.NoError(t, err)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.encoding != "" {
				req.Header.Set("Content-Encoding", tc.encoding)
			}
			code, body := s.do(req)
			require.Equal(t, tc.code, code)
			require.JSONEq(t, tc.want, string(body))
		})
	}

	t.Run("GET", func(t *testing.T) {
		code, body := s.get("/audit/webhook")
		require.Equal(t, 405, code)
		require.JSONEq(t, statusBody(405, "MethodNotAllowed", "the audit webhook accepts only POST"), string(body))
	})
	t.Run("node name too long", func(t *testing.T) {
		code, body := s.post("/audit/webhook/"+strings.Repeat("n", 254), "application/json", eventList())
		require.Equal(t, 400, code)
		require.JSONEq(t, statusBody(400, "BadRequest", "the node name in the path is 254 bytes; the limit is 253"), string(body))
	})

	// Nothing above was counted.
	code, body := s.get("/apis/sunset.dev/v1/apirequestcounts")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"apiVersion":"sunset.dev/v1","kind":"APIRequestCountList","metadata":{},"items":[]}`, string(body))
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_ingest_decode_errors_total Bodies and events that could not be decoded, by source and reason.
# TYPE sunset_ingest_decode_errors_total counter
sunset_ingest_decode_errors_total{reason="malformed_event",source="webhook"} 1
sunset_ingest_decode_errors_total{reason="malformed_json",source="webhook"} 4
sunset_ingest_decode_errors_total{reason="wrong_api_version",source="webhook"} 2
sunset_ingest_decode_errors_total{reason="wrong_kind",source="webhook"} 2
`), "sunset_ingest_decode_errors_total"))
}

func TestWebhookCountsGoodItemsOfAPartlyMalformedList(t *testing.T) {
	s := start(t, testConfig(t))
	body := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` +
		string(mustJSON(ev("good-1"))) + `,` +
		`"not an event",` +
		`{"auditID":"no-stage","verb":"get"},` +
		string(mustJSON(ev("bad-time", "requestReceivedTimestamp", "yesterday"))) + `,` +
		string(mustJSON(ev("good-2", "verb", "get"))) + `,` +
		`{"auditID":"v1alpha1","apiVersion":"audit.k8s.io/v1alpha1","stage":"ResponseComplete"}` +
		`]}`)
	code, resp := s.post("/audit/webhook/n1", "application/json", body)
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"cluster":"default","node":"n1","counted":2,"duplicates":0,"skipped":0,"invalid":4,"errors":[
		{"index":1,"reason":"malformed_event","message":"event is a JSON string, want an object"},
		{"index":2,"reason":"missing_stage","message":"event has no stage"},
		{"index":3,"reason":"bad_timestamp","message":"requestReceivedTimestamp is not an RFC 3339 time"},
		{"index":5,"reason":"wrong_api_version","message":"event apiVersion \"audit.k8s.io/v1alpha1\" is not supported; want \"audit.k8s.io/v1\" or \"audit.k8s.io/v1beta1\""}]}`, string(resp))

	got := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(2), got.Status.RequestCount)
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_ingest_events_total Audit events received, by source and what became of them (counted, duplicate, skipped_stage, not_deprecated, no_object_ref, expired, future, invalid, too_long).
# TYPE sunset_ingest_events_total counter
sunset_ingest_events_total{result="counted",source="webhook"} 2
sunset_ingest_events_total{result="duplicate",source="webhook"} 0
sunset_ingest_events_total{result="invalid",source="webhook"} 4
`), "sunset_ingest_events_total"))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func getAPI(t *testing.T, s *server, name string) sunsetv1.APIRequestCount {
	t.Helper()
	code, body := s.get("/apis/sunset.dev/v1/apirequestcounts/" + name)
	require.Equal(t, 200, code, string(body))
	var obj sunsetv1.APIRequestCount
	require.NoError(t, json.Unmarshal(body, &obj))
	return obj
}

// notFoundBody is apimachinery's NotFound Status for a sunset.dev resource,
// with Sunset's reason appended.
func notFoundBody(resource, name, why string) string {
	return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"NotFound","code":404,`+
		`"details":{"name":%q,"group":"sunset.dev","kind":%q},"message":%q}`, name, resource, fmt.Sprintf("%s.sunset.dev %q not found: %s", resource, name, why))
}
