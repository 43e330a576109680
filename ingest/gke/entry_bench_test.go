package gke

import (
	"testing"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
	"github.com/kube-sunset/sunset/internal/testutil/pubsubtest"
)

// benchEntries is the mix of the performance targets: ~1.2 KB Metadata
// events, 3 % of them deprecated, each written as GKE's LogEntry.
const benchEntries = 4000

// BenchmarkDecodeEntries makes LogEntries into events as a message's
// handler does, in full and behind the pre-filter, and reports the CPU
// an entry costs (one goroutine: its time is its CPU).
func BenchmarkDecodeEntries(b *testing.B) {
	gen := auditgen.Options{Prefix: "bench", DeprecatedEvery: 33, At: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	entries := make([][]byte, benchEntries)
	for i := range entries {
		entry, err := pubsubtest.LogEntry(gen.Append(nil, i))
		if err != nil {
			b.Fatal(err)
		}
		entries[i] = entry
	}
	for _, c := range []struct {
		name      string
		prefilter *auditjson.Prefilter
	}{{"full", nil}, {"prefilter", auditjson.NewPrefilter(classify.Interest{})}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for _, e := range entries {
					if _, _, _, err := decodeFiltered(e, c.prefilter); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*benchEntries), "cpu-us/event")
		})
	}
}
