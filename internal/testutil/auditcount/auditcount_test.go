package auditcount

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 11, 21, 19, 50, 0, 0, time.UTC)

func ev(t *testing.T, fields map[string]any) []byte {
	e := map[string]any{
		"auditID": "id", "stage": "ResponseComplete", "verb": "get", "requestURI": "/api/v1/endpoints",
		"user": map[string]any{"username": "alice"}, "userAgent": "kubectl/v1.32.4 (linux/amd64) kubernetes/abc",
		"objectRef":                map[string]any{"resource": "endpoints", "apiVersion": "v1"},
		"responseStatus":           map[string]any{"code": 200},
		"requestReceivedTimestamp": "2026-11-21T19:10:00.000001Z",
		"annotations":              map[string]any{"k8s.io/deprecated": "true"},
	}
	for k, v := range fields {
		if v == nil {
			delete(e, k)
		} else {
			e[k] = v
		}
	}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return b
}

// The rules, one event each.
func TestRules(t *testing.T) {
	cronjobs := map[string]any{"resource": "cronjobs", "apiGroup": "batch", "apiVersion": "v1beta1"}
	lifecycle := func(group, version, resource string) (string, string) {
		if group == "batch" && version == "v1beta1" && resource == "cronjobs" {
			return "1.21", "1.25"
		}
		return "", ""
	}
	c := New(Options{SystemUsers: []string{"system:apiserver"}, Lifecycle: lifecycle, ClusterVersions: map[string]string{"old": "1.20", "serving": "1.22"}})
	for _, e := range []struct {
		cluster string
		fields  map[string]any
	}{
		{"c", map[string]any{"auditID": "1", "stage": "RequestReceived"}},
		{"c", map[string]any{"auditID": "1", "stage": "ResponseStarted"}},
		{"c", map[string]any{"auditID": "1"}},
		{"c", map[string]any{"auditID": "1"}},                     // a duplicate
		{"d", map[string]any{"auditID": "1"}},                     // another cluster's request
		{"c", map[string]any{"auditID": "2", "annotations": nil}}, // not deprecated
		{"c", map[string]any{"auditID": "3", "stage": "Panic", "user": map[string]any{"username": "system:apiserver"}}},
		{"c", map[string]any{"auditID": "4", "objectRef": cronjobs, "annotations": nil, "responseStatus": map[string]any{"code": 404}}},
		{"serving", map[string]any{"auditID": "5", "objectRef": cronjobs, "annotations": nil, "responseStatus": map[string]any{"code": 404}}},
		{"old", map[string]any{"auditID": "6", "objectRef": cronjobs, "annotations": nil}},
		{"c", map[string]any{"auditID": "7", "requestURI": "/api/v1/endpoints?dryRun=All", "verb": "create",
			"impersonatedUser": map[string]any{"username": "bob"}, "requestReceivedTimestamp": nil, "stageTimestamp": "2026-11-21T18:59:59Z"}},
		{"c", map[string]any{"auditID": "8", "verb": "delete", "requestObject": map[string]any{"kind": "DeleteOptions", "dryRun": []string{"All"}},
			"annotations": map[string]any{"k8s.io/deprecated": "true", "k8s.io/removed-release": "1.40"}}},
	} {
		c.Add(t, e.cluster, "n", ev(t, e.fields))
	}
	h19, h18 := time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC), time.Date(2026, 11, 21, 18, 0, 0, 0, time.UTC)
	req := func(cluster string, r Request) Request {
		r.Cluster, r.Node = cluster, "n"
		if r.API == "" {
			r.API = "endpoints.v1"
		}
		if r.Username == "" {
			r.Username = "alice"
		}
		r.UserAgent = "kubectl/v1.32.4"
		if r.Verb == "" {
			r.Verb = "get"
		}
		if r.Hour.IsZero() {
			r.Hour = h19
		}
		return r
	}
	require.Equal(t, []Request{
		req("c", Request{}),
		req("d", Request{}),
		req("c", Request{Username: "system:apiserver", System: true}),
		req("c", Request{API: "cronjobs.v1beta1.batch", RemovedIn: "1.25", Removed: true}),
		// Served by 1.22, so its 404 is a missing object, but deprecated
		// in 1.21, so it counts; 1.20 is before the deprecation.
		req("serving", Request{API: "cronjobs.v1beta1.batch", RemovedIn: "1.25"}),
		req("c", Request{Username: "bob", Verb: "create", DryRun: true, Hour: h18}),
		req("c", Request{Verb: "delete", RemovedIn: "1.40", DryRun: true}),
	}, c.Requests)
	require.Equal(t, map[string]int64{"endpoints.v1": 5, "cronjobs.v1beta1.batch": 2}, c.ByAPI(nil))
	require.Equal(t, int64(5), c.Count(And(Hour(h19), NotSystem)))
	require.Equal(t, int64(7), c.Count(Last24h(now)))
	require.Zero(t, c.Count(Last24h(now.Add(24*time.Hour))))
	require.Equal(t, int64(7), c.Count(Window(now, time.Hour)), "since=1h at 19:50 begins at 18:00")
	require.Equal(t, int64(6), c.Count(Window(now.Add(time.Hour), time.Hour)), "since=1h at 20:50 begins at 19:00")
}

// The crafted admission events give the numbers README.md shows for
// `sunset report webhooks`.
func TestWebhooksOfTheCraftedEvents(t *testing.T) {
	c := New(Options{ValidatingConfigurations: map[string]string{"vault-validator.example.com": "vault"}})
	c.AddFile(t, "prod", "master-0", "../../../admission/testdata/crafted-events.jsonl")
	c.AddFile(t, "prod", "master-0", "../../../admission/testdata/crafted-events.jsonl") // duplicates
	webhooks, resources := c.WebhookTotals()
	require.Equal(t, map[string]WebhookCounts{
		"secrets.v1":                            {Requests: 1, Calls: 1, FailedOpen: 1, Slow: 1, Latency: 10200 * time.Millisecond},
		"configmaps.v1":                         {Requests: 1, Calls: 1, FailedOpen: 1, Slow: 1, Latency: 3 * time.Second},
		"pods.v1":                               {Requests: 2, Calls: 4, Mutations: 2, Slow: 1, Latency: 1720500 * time.Microsecond},
		"deployments.v1.apps":                   {Requests: 1, Calls: 1, Mutations: 1, Slow: 1, Latency: 800 * time.Millisecond},
		"tokenreviews.v1.authentication.k8s.io": {Requests: 1, Calls: 1},
	}, resources)
	require.Equal(t, map[string]WebhookCounts{
		"vault.vault-validator.example.com":                {Requests: 1, Calls: 1, FailedOpen: 1, Slow: 1, Latency: 10200 * time.Millisecond},
		"defaulter.defaults.example.com":                   {Requests: 1, Calls: 1, FailedOpen: 1, Slow: 1, Latency: 3 * time.Second},
		"istio-sidecar-injector.sidecar-injector.istio.io": {Requests: 1, Calls: 2, Mutations: 1, Slow: 1, Latency: 1700 * time.Millisecond},
		"pod-defaults.defaults.pods.example.com":           {Requests: 1, Calls: 1, Slow: 1, Latency: 1700 * time.Millisecond},
		"labeler.labels.example.com":                       {Requests: 1, Calls: 1, Mutations: 1, Slow: 1, Latency: 800 * time.Millisecond},
		"good.good.example.com":                            {Requests: 1, Calls: 1, Mutations: 1},
		"token-audit.tokens.audit.example.com":             {Requests: 1, Calls: 1},
	}, webhooks)
	require.Empty(t, c.Requests, "none of them is deprecated")
}

// failures is a testing.TB that records failures instead of failing.
type failures struct {
	testing.TB
	failed []string
}

func (f *failures) Helper()                           {}
func (f *failures) Errorf(format string, args ...any) { f.failed = append(f.failed, format) }

// A document with a wrong number fails, whichever number it is.
func TestRequireAPIRequestCountsFindsWrongNumbers(t *testing.T) {
	c := New(Options{SystemUsers: []string{"system:apiserver"}})
	for i, user := range []string{"alice", "alice", "bob", "system:apiserver"} {
		c.Add(t, "c", "n", ev(t, map[string]any{"auditID": string(rune('a' + i)), "user": map[string]any{"username": user}}))
	}
	last24h := make([]string, 24)
	for i := range last24h {
		last24h[i] = `{"requestCount":0,"byNode":[]}`
	}
	cur := `{"requestCount":4,"systemRequestCount":1,"byNode":[{"nodeName":"n","cluster":"c","requestCount":4,"systemRequestCount":1,` +
		`"byUser":[{"username":"alice","userAgent":"kubectl/v1.32.4","requestCount":2},{"username":"bob","userAgent":"kubectl/v1.32.4","requestCount":1}],"byUserOmitted":1}]}`
	last24h[19] = cur
	good := `{"kind":"APIRequestCountList","items":[{"kind":"APIRequestCount","metadata":{"name":"endpoints.v1"},"status":{"requestCount":4,"systemRequestCount":1,` +
		`"currentHour":` + cur + `,"last24h":[` + strings.Join(last24h, ",") + `]}}]}`
	f := &failures{TB: t}
	c.RequireAPIRequestCounts(f, now, nil, []byte(good))
	require.Empty(t, f.failed)

	for _, bad := range []struct{ from, to string }{
		{`"status":{"requestCount":4`, `"status":{"requestCount":5`},
		{`"status":{"requestCount":4,"systemRequestCount":1`, `"status":{"requestCount":4,"systemRequestCount":0`},
		{`"username":"bob","userAgent":"kubectl/v1.32.4","requestCount":1`, `"username":"bob","userAgent":"kubectl/v1.32.4","requestCount":2`},
		{`{"username":"alice","userAgent":"kubectl/v1.32.4","requestCount":2},{"username":"bob","userAgent":"kubectl/v1.32.4","requestCount":1}`,
			`{"username":"bob","userAgent":"kubectl/v1.32.4","requestCount":1},{"username":"alice","userAgent":"kubectl/v1.32.4","requestCount":2}`}, // busiest first
		{`"byUserOmitted":1`, `"byUserOmitted":0`},
		{`"nodeName":"n"`, `"nodeName":"m"`},
		{`"name":"endpoints.v1"`, `"name":"pods.v1"`},
	} {
		t.Run(bad.to, func(t *testing.T) {
			doc := strings.ReplaceAll(good, bad.from, bad.to)
			require.NotEqual(t, good, doc)
			f := &failures{TB: t}
			c.RequireAPIRequestCounts(f, now, nil, []byte(doc))
			require.NotEmpty(t, f.failed, "%s -> %s", bad.from, bad.to)
		})
	}
}
