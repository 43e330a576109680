package auditjson

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/kube-sunset/sunset/admission"
)

const realBatch = "../../testdata/apiserver-v1.36/webhook-metadata-batch/00002.body"

// withWebhookAnnotations returns the batch with the annotations of a slow
// mutating webhook added to every nth completed event.
func withWebhookAnnotations(tb testing.TB, body []byte, n int) ([]byte, int) {
	tb.Helper()
	var list struct {
		Kind       string           `json:"kind"`
		APIVersion string           `json:"apiVersion"`
		Items      []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		tb.Fatal(err)
	}
	added, completed := 0, 0
	for _, it := range list.Items {
		if it["stage"] != "ResponseComplete" {
			continue
		}
		completed++
		if completed%n != 0 {
			continue
		}
		ann, _ := it["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		ann["apiserver.latency.k8s.io/mutating-webhook"] = "1.20444134s"
		ann["apiserver.latency.k8s.io/validating-webhook"] = "723.179µs"
		ann["mutation.webhook.admission.k8s.io/round_0_index_0"] = `{"configuration":"e2e-mutator","webhook":"slow-mutator.e2e.example.com","mutated":false}`
		it["annotations"] = ann
		added++
	}
	out, err := json.Marshal(list)
	if err != nil {
		tb.Fatal(err)
	}
	return out, added
}

// The pre-filter's cost, each beside the decode that ignores admission
// webhooks altogether (what Sunset did before counting them):
//
//   - none: a real 400-event batch without webhook annotations, where the
//     only extra work is one scan of the body;
//   - mixed: the same batch with a slow mutating webhook's annotations on
//     every 10th completed event, where each event's annotations are
//     scanned and those with webhook keys decoded.
func BenchmarkDecodeAdmission(b *testing.B) {
	plain, err := os.ReadFile(realBatch)
	if err != nil {
		b.Fatal(err)
	}
	mixed, added := withWebhookAnnotations(b, plain, 10)
	// The pre-filter alone, for scale: what "none/sunset" adds.
	b.Run("none/pre-filter-only", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if admission.MayHave(plain) {
				b.Fatal("the batch has no webhook annotations")
			}
		}
		b.ReportMetric(float64(400*b.N)/b.Elapsed().Seconds(), "events/s")
	})
	for _, tc := range []struct {
		name string
		body []byte
	}{{"none", plain}, {"mixed", mixed}} {
		b.Run(tc.name+"/ignoring-webhooks", func(b *testing.B) {
			b.SetBytes(int64(len(tc.body)))
			for b.Loop() {
				if _, _, err := decodeBody[wireEvent](tc.body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(400*b.N)/b.Elapsed().Seconds(), "events/s")
		})
		b.Run(tc.name+"/sunset", func(b *testing.B) {
			b.SetBytes(int64(len(tc.body)))
			found := 0
			for b.Loop() {
				events, _, err := DecodeBody(tc.body)
				if err != nil {
					b.Fatal(err)
				}
				found = 0
				for _, e := range events {
					if e.Admission != nil {
						found++
					}
				}
			}
			if tc.name == "mixed" && found != added {
				b.Fatalf("%d events with webhook facts, want %d", found, added)
			}
			b.ReportMetric(float64(400*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkDecodeAdmissionInterleaved runs the decode that ignores webhooks
// and Sunset's alternately on the same batch, timing each, so that load from
// elsewhere on a shared machine falls on both alike; it reports the ratio.
func BenchmarkDecodeAdmissionInterleaved(b *testing.B) {
	plain, err := os.ReadFile(realBatch)
	if err != nil {
		b.Fatal(err)
	}
	mixed, _ := withWebhookAnnotations(b, plain, 10)
	for _, tc := range []struct {
		name string
		body []byte
	}{{"none", plain}, {"mixed", mixed}} {
		b.Run(tc.name, func(b *testing.B) {
			var ignoring, sunset time.Duration
			i := 0
			for b.Loop() {
				run := []func(){
					func() {
						start := time.Now()
						if _, _, err := decodeBody[wireEvent](tc.body); err != nil {
							b.Fatal(err)
						}
						ignoring += time.Since(start)
					},
					func() {
						start := time.Now()
						if _, _, err := DecodeBody(tc.body); err != nil {
							b.Fatal(err)
						}
						sunset += time.Since(start)
					},
				}
				// Alternate which goes first.
				run[i%2]()
				run[(i+1)%2]()
				i++
			}
			b.ReportMetric(float64(ignoring.Nanoseconds())/float64(i), "ns/ignoring")
			b.ReportMetric(float64(sunset.Nanoseconds())/float64(i), "ns/sunset")
			b.ReportMetric(float64(sunset)/float64(ignoring), "sunset/ignoring")
		})
	}
}
