package gke

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/golden"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/pubsubtest"
)

func readEntry(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/entries", name+".json"))
	require.NoError(t, err)
	return b
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Each hand-written entry becomes the event its rule says, exactly; the
// event JSON toEvent builds is kept as a golden beside it.
func TestEntriesMapToTheirEvents(t *testing.T) {
	const kubectl = "kubectl/v1.36.3 (linux/amd64) kubernetes/2d8c1c4"
	ref := func(group, version, resource, sub string) *classify.ObjectRef {
		return &classify.ObjectRef{Group: group, Version: version, Resource: resource, Subresource: sub}
	}
	for _, tc := range []struct {
		name string
		want classify.Event
		// admission says whether the labels hold admission webhook facts.
		admission bool
		// body says whether the request body is kept (requestObject).
		body bool
	}{
		{name: "list-deprecated", want: classify.Event{ // verb, cluster-scoped collection, user, IP, agent, labels
			ID: "0b6f4c1e-3a52-4d7e-9a0c-5f1d2e8b7a10", Stage: "ResponseComplete", Verb: "list", Username: "alice@acme.example", UserAgent: kubectl,
			ObjectRef: ref("storage.k8s.io", "v1beta1", "volumeattributesclasses", ""), ResponseCode: 200, Deprecated: true, RemovedRelease: "1.37",
			RequestReceived: at("2026-11-21T19:24:03.118204Z"), StageTime: at("2026-11-21T19:24:03.118204Z"), SourceIPs: []string{"203.0.113.7"}}},
		{name: "get-namespaced", want: classify.Event{ // core group, namespaced name
			ID: "5d1f0a77-2c64-4b8e-8e31-9c0f7b6a2d45", Stage: "ResponseComplete", Verb: "get", Username: "system:serviceaccount:monitoring:prometheus",
			UserAgent: "prometheus/3.2.1", ObjectRef: ref("", "v1", "endpoints", ""), ResponseCode: 200, Deprecated: true,
			RequestReceived: at("2026-11-21T19:25:11.004512Z"), StageTime: at("2026-11-21T19:25:11.004512Z"), SourceIPs: []string{"10.8.0.14"}}},
		{name: "watch-started", want: classify.Event{ // first && !last: ResponseStarted
			ID: "8e2b7d90-1f4c-4a3b-b5e6-0d9c8a7f6e51", Stage: "ResponseStarted", Verb: "watch", Username: "alice@acme.example", UserAgent: kubectl,
			ObjectRef: ref("e2e.example.com", "v1beta1", "widgets", ""), ResponseCode: 200, Deprecated: true,
			RequestReceived: at("2026-11-21T19:26:00.250114Z"), StageTime: at("2026-11-21T19:26:00.250114Z"), SourceIPs: []string{"203.0.113.7"}}},
		{name: "watch-complete", want: classify.Event{ // last: ResponseComplete, the same ID; timestamp, not receiveTimestamp
			ID: "8e2b7d90-1f4c-4a3b-b5e6-0d9c8a7f6e51", Stage: "ResponseComplete", Verb: "watch", Username: "alice@acme.example", UserAgent: kubectl,
			ObjectRef: ref("e2e.example.com", "v1beta1", "widgets", ""), ResponseCode: 200, Deprecated: true,
			RequestReceived: at("2026-11-21T19:26:00.250114Z"), StageTime: at("2026-11-21T19:26:00.250114Z"), SourceIPs: []string{"203.0.113.7"}}},
		{name: "create-crd", body: true, want: classify.Event{ // cluster-scoped name
			ID: "c41a9e2d-6b0f-4f17-a8d3-2e5b9c7d1f06", Stage: "ResponseComplete", Verb: "create", Username: "alice@acme.example", UserAgent: kubectl,
			ObjectRef: ref("apiextensions.k8s.io", "v1", "customresourcedefinitions", ""), ResponseCode: 200,
			RequestReceived: at("2026-11-21T19:19:42.771930Z"), StageTime: at("2026-11-21T19:19:42.771930Z"), SourceIPs: []string{"203.0.113.7"}}},
		{name: "exec-create", want: classify.Event{ // subresource; the method's last part is the verb
			ID: "f07c3b5a-9d28-4e61-b4a7-3c2e1d0f9b88", Stage: "ResponseComplete", Verb: "create", Username: "bob@acme.example", UserAgent: kubectl,
			ObjectRef: ref("", "v1", "pods", "exec"), ResponseCode: 200,
			RequestReceived: at("2026-11-21T19:27:15.401288Z"), StageTime: at("2026-11-21T19:27:15.401288Z"), SourceIPs: []string{"198.51.100.23"}}},
		{name: "status-update", want: classify.Event{
			ID: "2a6d8f41-0c7e-4b95-9e3a-7f1b5c2d8e64", Stage: "ResponseComplete", Verb: "update", Username: "system:serviceaccount:kube-system:deployment-controller",
			UserAgent: "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/2d8c1c4/system:serviceaccount:kube-system:deployment-controller",
			ObjectRef: ref("apps", "v1", "deployments", "status"), ResponseCode: 200,
			RequestReceived: at("2026-11-21T19:27:20.009811Z"), StageTime: at("2026-11-21T19:27:20.009811Z"), SourceIPs: []string{"172.16.0.2"}}},
		{name: "patch", body: true, want: classify.Event{
			ID: "6e3c1a92-8b4d-4f0e-a7c5-1d9b3e2f4a70", Stage: "ResponseComplete", Verb: "patch", Username: "alice@acme.example", UserAgent: kubectl,
			ObjectRef: ref("apps", "v1", "deployments", ""), ResponseCode: 200,
			RequestReceived: at("2026-11-21T19:28:02.640117Z"), StageTime: at("2026-11-21T19:28:02.640117Z"), SourceIPs: []string{"203.0.113.7"}}},
		{name: "deletecollection", want: classify.Event{ // namespaced collection
			ID: "9b0e4d27-5a1c-4c83-b6f2-8e7d3a1c5b92", Stage: "ResponseComplete", Verb: "deletecollection", Username: "system:serviceaccount:ci:janitor",
			UserAgent: "janitor/1.4.0", ObjectRef: ref("", "v1", "pods", ""), ResponseCode: 200,
			RequestReceived: at("2026-11-21T19:28:30.1185Z"), StageTime: at("2026-11-21T19:28:30.1185Z"), SourceIPs: []string{"10.8.1.31"}}},
		{name: "delete-dryrun", body: true, want: classify.Event{ // a DELETE's DeleteOptions body tells a dry run
			ID: "3f7a2c08-d1e9-4b6a-85c4-0a2b9d8e7f13", Stage: "ResponseComplete", Verb: "delete", Username: "alice@acme.example", UserAgent: kubectl,
			ObjectRef: ref("", "v1", "endpoints", ""), ResponseCode: 200, Deprecated: true, DryRun: true,
			RequestReceived: at("2026-11-21T19:28:45.550021Z"), StageTime: at("2026-11-21T19:28:45.550021Z"), SourceIPs: []string{"203.0.113.7"}}},
		{name: "not-found", want: classify.Event{ // NOT_FOUND (5) is 404: a removed API
			ID: "71c5e9b3-2f8a-4d06-9b1e-6c4d0a3f2e85", Stage: "ResponseComplete", Verb: "list", Username: "system:serviceaccount:legacy:old-operator",
			UserAgent: "old-operator/0.9.1", ObjectRef: ref("extensions", "v1beta1", "ingresses", ""), ResponseCode: 404,
			RequestReceived: at("2026-11-21T19:29:10.33127Z"), StageTime: at("2026-11-21T19:29:10.33127Z"), SourceIPs: []string{"10.8.2.9"}}},
		{name: "forbidden", want: classify.Event{ // PERMISSION_DENIED (7) is 403
			ID: "d2a8f6c4-7e1b-4a59-8c30-5b9e2d1f0a67", Stage: "ResponseComplete", Verb: "list", Username: "carol@acme.example", UserAgent: kubectl,
			ObjectRef: ref("e2e.example.com", "v1beta1", "widgets", ""), ResponseCode: 403, Deprecated: true,
			RequestReceived: at("2026-11-21T19:29:40.720385Z"), StageTime: at("2026-11-21T19:29:40.720385Z"), SourceIPs: []string{"192.0.2.44"}}},
		{name: "namespace-finalize", want: classify.Event{ // namespaces/<ns>/finalize is the namespace's subresource
			ID: "4c9e1b36-a0d7-4f28-b3e5-9d2c7a6f1e04", Stage: "ResponseComplete", Verb: "update", Username: "system:serviceaccount:kube-system:namespace-controller",
			UserAgent: "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/2d8c1c4/system:serviceaccount:kube-system:namespace-controller",
			ObjectRef: ref("", "v1", "namespaces", "finalize"), ResponseCode: 200,
			RequestReceived: at("2026-11-21T19:30:05.002117Z"), StageTime: at("2026-11-21T19:30:05.002117Z"), SourceIPs: []string{"172.16.0.2"}}},
		{name: "no-operation", want: classify.Event{ // no operation: ResponseComplete, the ID from insertId; a dotted group
			ID: "e5b3d7a1-4c2f-4e90-a6b8-2d1c0f9e8a37", Stage: "ResponseComplete", Verb: "get", Username: "alice@acme.example", UserAgent: kubectl,
			ObjectRef: ref("rbac.authorization.k8s.io", "v1", "roles", ""), ResponseCode: 200,
			RequestReceived: at("2026-11-21T19:30:30.447802Z"), StageTime: at("2026-11-21T19:30:30.447802Z"), SourceIPs: []string{"203.0.113.7"}}},
		{name: "admission-webhook", admission: true, want: classify.Event{ // webhook annotations are labels too
			ID: "a1f4c8e2-6d3b-4a70-9e51-b8c2d7f0e3a9", Stage: "ResponseComplete", Verb: "create", Username: "system:serviceaccount:kube-system:replicaset-controller",
			UserAgent: "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/2d8c1c4/system:serviceaccount:kube-system:replicaset-controller",
			ObjectRef: ref("", "v1", "pods", ""), ResponseCode: 200,
			RequestReceived: at("2026-11-21T19:30:50.880141Z"), StageTime: at("2026-11-21T19:30:50.880141Z"), SourceIPs: []string{"172.16.0.2"}}},
		{name: "node-proxy", want: classify.Event{ // a proxy's path after the subresource is not part of it
			ID: "b7e2a9d4-3c1f-4b86-a0e7-5d4c3b2a1f98", Stage: "ResponseComplete", Verb: "get", Username: "system:serviceaccount:monitoring:prometheus",
			UserAgent: "prometheus/3.2.1", ObjectRef: ref("", "v1", "nodes", "proxy"), ResponseCode: 200,
			RequestReceived: at("2026-11-21T19:31:15.223019Z"), StageTime: at("2026-11-21T19:31:15.223019Z"), SourceIPs: []string{"10.8.0.14"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := readEntry(t, tc.name)
			raw, node, err := toEvent(data)
			require.NoError(t, err)
			require.Equal(t, "europe-west1", node, "resource.labels.location stands for the node")
			golden.AssertJSON(t, filepath.Join("testdata/entries", tc.name+".event.json"), raw)

			got, node, err := decode(data)
			require.NoError(t, err)
			require.Equal(t, "europe-west1", node)
			require.Equal(t, tc.admission, got.Admission != nil, "admission facts")
			if tc.admission {
				require.Len(t, got.Admission.Calls, 1)
				require.Equal(t, "mutation.gatekeeper.sh", got.Admission.Calls[0].Webhook)
				require.Equal(t, 12500*time.Microsecond, got.Admission.MutatingLatency)
			}
			require.Equal(t, tc.body, got.RequestObject != nil, "request body")
			got.Admission, got.RequestObject = nil, nil
			require.Equal(t, tc.want, got)
		})
	}
}

// The rest of the mapping: every namespace path form, and the gRPC codes.
func TestResourceNamesAndStatusCodes(t *testing.T) {
	for name, want := range map[string]*objectRef{
		"core/v1/namespaces":                        {APIVersion: "v1", Resource: "namespaces"},
		"core/v1/namespaces/team-a":                 {APIVersion: "v1", Namespace: "team-a", Resource: "namespaces", Name: "team-a"},
		"core/v1/namespaces/team-a/status":          {APIVersion: "v1", Namespace: "team-a", Resource: "namespaces", Name: "team-a", Subresource: "status"},
		"core/v1/namespaces/team-a/pods":            {APIVersion: "v1", Namespace: "team-a", Resource: "pods"},
		"core/v1/namespaces/team-a/pods/web-0/log":  {APIVersion: "v1", Namespace: "team-a", Resource: "pods", Name: "web-0", Subresource: "log"},
		"core/v1/pods":                              {APIVersion: "v1", Resource: "pods"},
		"apps/v1/namespaces/status/deployments/web": {APIGroup: "apps", APIVersion: "v1", Namespace: "status", Resource: "deployments", Name: "web"},
		"certificates.k8s.io/v1/certificatesigningrequests/csr-1/approval": {APIGroup: "certificates.k8s.io", APIVersion: "v1",
			Resource: "certificatesigningrequests", Name: "csr-1", Subresource: "approval"},
		"core/v1": nil, "": nil, "healthz": nil,
	} {
		require.Equal(t, want, parseResourceName(name), name)
	}
	want := map[int64]int{0: 200, 1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409,
		11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401, 17: 500, -1: 500, 1 << 40: 500}
	for code, status := range want {
		require.Equal(t, status, httpStatus(code), "code %d", code)
	}
}

// entryWith is list-deprecated.json with one change made to its decoded
// form, re-encoded.
func entryWith(t *testing.T, change func(e map[string]any)) []byte {
	t.Helper()
	var e map[string]any
	require.NoError(t, json.Unmarshal(readEntry(t, "list-deprecated"), &e))
	change(e)
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return b
}

func payload(e map[string]any) map[string]any { return e["protoPayload"].(map[string]any) }

// Messages that are not Kubernetes audit entries, or cannot be read, are
// told apart by reason, whatever their content, without panicking and
// without quoting it.
func TestMessagesThatAreNotEvents(t *testing.T) {
	secret := "s3cr3t-token-value"
	for _, tc := range []struct {
		name string
		data []byte
		want Reason
	}{
		{"GKE API entry", readEntry(t, "not-audit"), ReasonNotAudit},
		{"jsonPayload entry", readEntry(t, "json-payload"), ReasonWrongPayloadType},
		{"other payload type", entryWith(t, func(e map[string]any) {
			payload(e)["@type"] = "type.googleapis.com/google.appengine.logging.v1.RequestLog"
		}), ReasonWrongPayloadType},
		{"empty object", []byte(`{}`), ReasonWrongPayloadType},
		{"not JSON", []byte("GET /" + secret), ReasonMalformedJSON},
		{"cut short", readEntry(t, "list-deprecated")[:300], ReasonMalformedJSON},
		{"empty", nil, ReasonMalformedJSON},
		{"null", []byte("null"), ReasonMalformedEntry},
		{"array", []byte(`["` + secret + `"]`), ReasonMalformedEntry},
		{"string", []byte(`"` + secret + `"`), ReasonMalformedEntry},
		{"labels not strings", entryWith(t, func(e map[string]any) { e["labels"] = map[string]any{"k8s.io/deprecated": true} }), ReasonMalformedEntry},
		{"labels a list", entryWith(t, func(e map[string]any) { e["labels"] = []any{secret} }), ReasonMalformedEntry},
		{"status code a string", entryWith(t, func(e map[string]any) { payload(e)["status"] = map[string]any{"code": "5"} }), ReasonMalformedEntry},
		{"operation flag a string", entryWith(t, func(e map[string]any) { e["operation"].(map[string]any)["last"] = "yes" }), ReasonMalformedEntry},
		{"no methodName", entryWith(t, func(e map[string]any) { delete(payload(e), "methodName") }), ReasonMalformedEntry},
		{"methodName without verb", entryWith(t, func(e map[string]any) { payload(e)["methodName"] = "io.k8s.core.v1.pods." }), ReasonMalformedEntry},
		{"no timestamp", entryWith(t, func(e map[string]any) { delete(e, "timestamp") }), ReasonBadTimestamp},
		{"timestamp not RFC 3339", entryWith(t, func(e map[string]any) { e["timestamp"] = "yesterday " + secret }), ReasonBadTimestamp},
		{"nested past encoding/json's depth", []byte(`{"protoPayload":{"request":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`), ReasonMalformedJSON},
		{"over MaxMessageBytes", entryWith(t, func(e map[string]any) { e["labels"] = map[string]any{"big": strings.Repeat("x", MaxMessageBytes)} }), ReasonTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decode(tc.data)
			var e *entryError
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.want, e.Reason)
			require.NotContains(t, e.Message, secret)
		})
	}
}

// Hostile entries that are still audit entries decode, and are bounded
// where a bound applies: a 1 MB operation.id is the request's ID, held as
// the digest the store keeps of it, thousands of labels are annotations, and a
// location that is no location is not a node.
func TestHostileEntriesThatStillDecode(t *testing.T) {
	longID := strings.Repeat("a", 1_000_000)
	ev, _, err := decode(entryWith(t, func(e map[string]any) { e["operation"].(map[string]any)["id"] = longID }))
	require.NoError(t, err)
	require.Equal(t, countkey.MarkID(longID), ev.ID, "a long ID is held as its digest, as the store marks it")
	require.True(t, ev.Deprecated)

	ev, _, err = decode(entryWith(t, func(e map[string]any) {
		labels := e["labels"].(map[string]any)
		for i := range 5000 {
			labels[strings.Repeat("k", 8)+string(rune('a'+i%26))+strings.Repeat("x", i%7)+"/"+string(rune('A'+i%26))+string(rune(i))] = "v"
		}
	}))
	require.NoError(t, err)
	require.True(t, ev.Deprecated)
	require.Equal(t, "1.37", ev.RemovedRelease)

	for _, loc := range []string{strings.Repeat("a", 1<<16), "../etc", "EUROPE", "", "us-central1\x00"} {
		_, node, err := decode(entryWith(t, func(e map[string]any) {
			e["resource"].(map[string]any)["labels"].(map[string]any)["location"] = loc
		}))
		require.NoError(t, err)
		require.Equal(t, DefaultNode, node)
	}

	// A message of exactly MaxMessageBytes is read.
	data := entryWith(t, func(e map[string]any) { e["labels"].(map[string]any)["pad"] = "" })
	data = entryWith(t, func(e map[string]any) {
		e["labels"].(map[string]any)["pad"] = strings.Repeat("p", MaxMessageBytes-len(data))
	})
	require.Len(t, data, MaxMessageBytes)
	_, _, err = decode(data)
	require.NoError(t, err)

	// A status code beyond google.rpc.Code, a request body that is not an
	// object, and a resourceName of many parts.
	ev, _, err = decode(entryWith(t, func(e map[string]any) {
		payload(e)["status"] = map[string]any{"code": 1 << 40}
		payload(e)["request"] = "not an object"
		payload(e)["resourceName"] = "core/v1/namespaces/a/pods/b/c" + strings.Repeat("/d", 10000)
	}))
	require.NoError(t, err)
	require.Equal(t, int32(500), ev.ResponseCode)
	require.Nil(t, ev.RequestObject)
	require.Equal(t, &classify.ObjectRef{Version: "v1", Resource: "pods", Subresource: "c"}, ev.ObjectRef)
}

// Every captured event, written as GKE's entry by pubsubtest.LogEntry (the
// mapping written again, in reverse) and read back, is the same event in
// all that counting reads and GKE carries.
func TestCapturedEventsRoundTrip(t *testing.T) {
	n := 0
	for _, line := range ingesttest.CapturedLines(t, "../../testdata") {
		entry, err := pubsubtest.LogEntry(line)
		if err != nil {
			continue
		}
		want, err := auditjson.DecodeEvent(line)
		if err != nil {
			// Not an event to any input (a malformed sample).
			continue
		}
		got, node, err := decode(entry)
		require.NoError(t, err, "%s", line)
		require.Equal(t, pubsubtest.Location, node)
		n++
		if want.Stage != classify.StageResponseComplete && want.Stage != classify.StagePanic {
			want.Stage = "ResponseStarted"
		} else {
			want.Stage = classify.StageResponseComplete
		}
		if want.RequestReceived.IsZero() {
			want.RequestReceived = want.StageTime
		}
		want.StageTime = want.RequestReceived
		if want.ResponseCode != 404 {
			require.Equal(t, want.ResponseCode >= 400, got.ResponseCode >= 400, "%s", line)
			want.ResponseCode = got.ResponseCode
		}
		if len(want.SourceIPs) > 0 {
			want.SourceIPs = want.SourceIPs[len(want.SourceIPs)-1:]
		}
		// What GKE's entry does not carry: the real caller of an
		// impersonated request, the pod behind a token, the request URI
		// (and with it most dry runs). The body is compared as JSON.
		want.ImpersonatedBy, want.PodName, want.PodNode, want.DryRun, got.DryRun = "", "", "", false, false
		if len(want.RequestObject) > 0 {
			require.JSONEq(t, string(want.RequestObject), string(got.RequestObject))
		}
		want.RequestObject, got.RequestObject = nil, nil
		require.Equal(t, want, got, "%s", line)
	}
	require.Greater(t, n, 200)
}

// A message of the largest size made of labels takes two to three times
// its size to decode (2.1 MB alone, 3.1 MB after the package's other
// tests): the labels are read by the event's decoder, within its bounds,
// where a map of them took 21 MiB for this one.
func TestManyLabelsDecodeWithinTheirSize(t *testing.T) {
	data := entryWith(t, func(e map[string]any) {
		labels := e["labels"].(map[string]any)
		for i := range 100_000 {
			labels[strconv.FormatInt(int64(i), 16)] = ""
		}
	})
	require.Less(t, len(data), MaxMessageBytes)
	ev, _, err := decode(data)
	require.NoError(t, err)
	require.True(t, ev.Deprecated, "the deprecated label is read among the others")
	// What other goroutines of the process allocate meanwhile only adds:
	// the least of a few runs is the decode's own.
	least := uint64(math.MaxUint64)
	for range 5 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, _ = decode(data)
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	t.Logf("decoding a %d-byte message of 100,000 labels allocates %d bytes", len(data), least)
	require.Less(t, least, uint64(4*len(data)), "bytes allocated decoding a %d-byte message", len(data))
}
