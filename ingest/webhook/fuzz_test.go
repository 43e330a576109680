package webhook

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// secretMarker sits in the seeds' request objects and annotations, where
// a secret would; no error answer may quote it.
const secretMarker = "s3cr3t-do-not-echo"

// gzipMagic starts every gzip stream, and no JSON text.
var gzipMagic = []byte{0x1f, 0x8b}

// gzipped compresses b.
func gzipped(tb testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// junkList is an EventList of n items that are not events: [1,1,...].
func junkList(n int) []byte {
	return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[1` + strings.Repeat(",1", n-1) + `]}`)
}

// FuzzWebhookBody posts arbitrary bodies to the real handler with the real
// aggregator, as a dry run (everything but the commit: decoding, item
// checks, classification, duplicates, the answer). Seeded with the bodies
// kube-apiserver sent and single captured events, and with compressed
// ones: a body that starts as gzip does is sent with Content-Encoding:
// gzip, and the limit applies to what it inflates to.
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
	// Compressed: a captured event in a list, junk items, a bomb of
	// about 8 KB that inflates past the limit, wrong versions, not JSON.
	if lines := ingesttest.CapturedLines(f, "../../testdata"); len(lines) > 0 {
		f.Add(gzipped(f, []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`+string(lines[0])+`]}`)))
	}
	f.Add(gzipped(f, junkList(1000)))
	f.Add(gzipped(f, []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`+strings.Repeat(" ", 5<<20)+`]}`)))
	f.Add(gzipped(f, []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1beta1","items":[]}`)))
	// Hostile lengths, compressed: an item over the item bound among good
	// ones, a body over the whole-body bound with its items before its
	// kind, and an auditID, requestURI and timestamp each as long as a
	// large event.
	good := `{"auditID":"g","stage":"ResponseComplete","verb":"list","objectRef":{"resource":"endpoints","apiVersion":"v1"},"annotations":{"k8s.io/deprecated":"true"}}`
	f.Add(gzipped(f, []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`+good+`,{"auditID":"big","stage":"ResponseComplete","requestObject":{"d":"`+
		strings.Repeat("x", 9<<20)+`"}},`+good+`]}`)))
	f.Add(gzipped(f, []byte(`{"items":[`+good+`,{"auditID":"big","stage":"ResponseComplete","requestObject":"`+strings.Repeat("x", 5<<20)+
		`"}],"kind":"EventList","apiVersion":"audit.k8s.io/v1"}`)))
	f.Add(gzipped(f, []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"`+strings.Repeat("i", 1<<20)+
		`","stage":"ResponseComplete","requestURI":"/api/v1/endpoints?dryRun=All&l=`+strings.Repeat("a", 1<<20)+
		`","requestReceivedTimestamp":"`+strings.Repeat("2", 1<<20)+`"}]}`)))
	f.Add(gzipped(f, []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"stage":7,"note":"`+secretMarker+`"}]}`)))
	f.Add(gzipped(f, []byte("not json "+secretMarker)))
	f.Add(gzipMagic)

	now := ingesttest.CapturedNow
	agg := aggregate.New(aggregate.Options{Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	h := New(Options{Ingester: agg, Tallies: agg, Logger: zerolog.Nop(), MaxBodyBytes: 4 << 20})
	mux := http.NewServeMux()
	h.Register(mux)

	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/audit/webhook/prod/master-0?dryRun=All", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		compressed := bytes.HasPrefix(body, gzipMagic)
		if compressed {
			req.Header.Set("Content-Encoding", "gzip")
			// What it inflates to, up to a byte past the limit; a broken
			// stream is a body no envelope can be read from.
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err == nil {
				body, err = io.ReadAll(io.LimitReader(zr, 4<<20+1))
			}
			if err != nil {
				body = nil
			}
		}
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
			if len(body) <= 4<<20 && (!compressed || body != nil) {
				t.Fatalf("413 for %d bytes", len(body))
			}
		default:
			t.Fatalf("answered %d: %s", rec.Code, rec.Body)
		}
	})
}
