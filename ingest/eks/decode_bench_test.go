package eks

import (
	"testing"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// benchEvents is the mix of the performance targets: ~1.2 KB Metadata
// events, 3 % of them deprecated.
const benchEvents = 4000

// BenchmarkDecodeMessages decodes log events' messages as a page does,
// in full and behind the pre-filter, and reports the CPU an event costs
// (one goroutine: its time is its CPU).
func BenchmarkDecodeMessages(b *testing.B) {
	gen := auditgen.Options{Prefix: "bench", DeprecatedEvery: 33, At: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	msgs := make([]string, benchEvents)
	for i := range msgs {
		msgs[i] = string(gen.Append(nil, i))
	}
	for _, c := range []struct {
		name      string
		prefilter *auditjson.Prefilter
	}{{"full", nil}, {"prefilter", auditjson.NewPrefilter(classify.Interest{})}} {
		b.Run(c.name, func(b *testing.B) {
			s := &Source{o: Options{Prefilter: c.prefilter}}
			for b.Loop() {
				var aside classify.Prefiltered
				for _, m := range msgs {
					if _, _, bad := s.decode(m, 0, &aside); bad != nil {
						b.Fatal(bad)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*benchEvents), "cpu-us/event")
		})
	}
}
