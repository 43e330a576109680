package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/ingesttest"
)

// secretMarker sits in the seeds' request objects and annotations, where
// a secret would; no error answer may quote it.
const secretMarker = "s3cr3t-do-not-echo"

// FuzzWebhookBody posts arbitrary bodies to the real handler with the real
// aggregator, as a dry run (everything but the commit: decoding, item
// checks, classification, duplicates, the answer). Seeded with the bodies
// kube-apiserver sent and single captured events.
func FuzzWebhookBody(f *testing.F) {
	for _, b := range ingesttest.CapturedBodies(f, "../../testdata") {
		// The big bodies (up to 300 KB) make each mutation slow and
		// minimizing what they find take minutes; their small siblings
		// and the single events cover the same shapes.
		if len(b) <= 32<<10 {
			f.Add(b)
		}
	}
	for _, line := range ingesttest.CapturedLines(f, "../../testdata") {
		f.Add(line)
		f.Add([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + string(line) + `,{"stage":7}]}`))
	}
	f.Add([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"a","stage":"ResponseComplete","verb":"delete",` +
		`"requestObject":{"kind":"DeleteOptions","dryRun":["All"],"token":"` + secretMarker + `"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},` +
		`"annotations":{"k8s.io/deprecated":"true","note":"` + secretMarker + `"}}]}`))
	f.Add([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1beta1","items":[]}`))
	f.Add([]byte(`null`))

	now := ingesttest.CapturedNow
	agg := aggregate.New(aggregate.Options{Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	h := New(Options{Ingester: agg, Logger: zerolog.Nop(), MaxBodyBytes: 4 << 20})
	mux := http.NewServeMux()
	h.Register(mux)

	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/audit/webhook/prod/master-0?dryRun=All", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)

		// What an independent decoding of the envelope expects.
		var env struct {
			Kind, APIVersion string
			Items            []json.RawMessage
		}
		envErr := json.Unmarshal(body, &env)
		wellFormed := envErr == nil && env.APIVersion == auditjson.APIVersion &&
			(env.Kind == auditjson.KindEventList || env.Kind == auditjson.KindEvent)

		switch rec.Code {
		case http.StatusOK:
			var resp DryRunResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("200 with a body that is not a DryRunResponse: %v", err)
			}
			if !wellFormed {
				t.Fatalf("200 for a body whose envelope is not an audit.k8s.io/v1 EventList or Event (%v)", envErr)
			}
			items := len(env.Items)
			if env.Kind == auditjson.KindEvent {
				items = 1
			}
			if got := len(resp.Events) + resp.Invalid; got != items {
				t.Fatalf("%d events and %d invalid for %d items", len(resp.Events), resp.Invalid, items)
			}
			if got := resp.Counted + resp.Duplicates + resp.Skipped; got != len(resp.Events) {
				t.Fatalf("counted+duplicates+skipped = %d for %d events", got, len(resp.Events))
			}
			if len(resp.Errors) != min(resp.Invalid, maxReportedItemErrors) {
				t.Fatalf("%d item errors listed for %d invalid items", len(resp.Errors), resp.Invalid)
			}
		case http.StatusBadRequest:
			if wellFormed && env.Kind == auditjson.KindEventList {
				t.Fatalf("400 for a well-formed EventList: %s", rec.Body)
			}
			if bytes.Contains(rec.Body.Bytes(), []byte(secretMarker)) {
				t.Fatalf("the error quotes the body: %s", rec.Body)
			}
		case http.StatusRequestEntityTooLarge:
			if len(body) <= 4<<20 {
				t.Fatalf("413 for %d bytes", len(body))
			}
		default:
			t.Fatalf("answered %d: %s", rec.Code, rec.Body)
		}
	})
}
