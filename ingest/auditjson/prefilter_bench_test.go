package auditjson

import (
	"encoding/json"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// BenchmarkDecodeBatch decodes one 400-event batch of ~1.2 KB Metadata
// events, 3 % of them deprecated:
//
//   - full-auditv1, the baseline: encoding/json into kube-apiserver's own
//     auditv1.EventList, as a typical receiver does;
//   - full: Sunset's decode of every event (decoder: full);
//   - prefilter: the events that cannot count set aside undecoded.
func BenchmarkDecodeBatch(b *testing.B) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	body := auditgen.Options{Prefix: "bench", DeprecatedEvery: 33, At: now}.List(0, 400)
	report := func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportMetric(float64(400*b.N)/b.Elapsed().Seconds(), "events/s")
	}
	b.Run("full-auditv1", func(b *testing.B) {
		for b.Loop() {
			var list auditv1.EventList
			if err := json.Unmarshal(body, &list); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := DecodeBody(body); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	p := NewPrefilter(testAggregator(b, now).Interest())
	b.Run("prefilter", func(b *testing.B) {
		for b.Loop() {
			events, _, _, err := DecodeBodyFiltered(body, p)
			if err != nil || len(events) != 13 {
				b.Fatal(len(events), err)
			}
		}
		report(b)
	})
}

// BenchmarkDecodeEvent decodes, one at a time, the events that may count:
// 400 generated ~1.2 KB Metadata events and the captured ones, as a log's
// lines and Kafka messages are decoded once the pre-filter has kept them.
//
//   - encoding-json, the baseline: the same wire type by encoding/json,
//     which DecodeEvent used for every event before decodeWire;
//   - sunset: DecodeEvent, decodeWire with encoding/json behind it.
func BenchmarkDecodeEvent(b *testing.B) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	gen := auditgen.Options{Prefix: "bench", DeprecatedEvery: 1, At: now}
	sets := map[string][][]byte{"captured": capturedEvents(b)}
	for i := range 400 {
		sets["generated"] = append(sets["generated"], gen.Append(nil, i))
	}
	for _, name := range []string{"generated", "captured"} {
		events := sets[name]
		report := func(b *testing.B) {
			b.ReportMetric(float64(len(events)*b.N)/b.Elapsed().Seconds(), "events/s")
		}
		b.Run(name+"/encoding-json", func(b *testing.B) {
			for b.Loop() {
				for _, raw := range events {
					if _, err := decodeEvent[wireEvent](raw); err != nil {
						b.Fatal(err)
					}
				}
			}
			report(b)
		})
		b.Run(name+"/sunset", func(b *testing.B) {
			for b.Loop() {
				for _, raw := range events {
					if _, err := DecodeEvent(raw); err != nil {
						b.Fatal(err)
					}
				}
			}
			report(b)
		})
	}
}

// BenchmarkPrefilterSkip judges, one line at a time as replay does, 400
// generated ~1.2 KB Metadata events, 3 % deprecated: the walk that
// validates every byte and reads the top-level keys, and the verdict.
// It fails unless exactly the deprecated events are kept.
func BenchmarkPrefilterSkip(b *testing.B) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	gen := auditgen.Options{Prefix: "bench", DeprecatedEvery: 33, At: now}
	var events [][]byte
	size := 0
	for i := range 400 {
		events = append(events, gen.Append(nil, i))
		size += len(events[i])
	}
	p := NewPrefilter(testAggregator(b, now).Interest())
	b.SetBytes(int64(size))
	for b.Loop() {
		kept := 0
		for _, raw := range events {
			if _, skip := p.Skip(raw); !skip {
				kept++
			}
		}
		if kept != 13 {
			b.Fatalf("%d events kept, want 13", kept)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(400*b.N), "us/event")
}
