package kafka

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// benchMessages are 1,000 messages of auditgen's mix (3% deprecated) in
// the shape named.
func benchMessages(shape string) [][]byte {
	gen := auditgen.Options{Prefix: "bench", DeprecatedEvery: 33, At: time.Now()}
	msgs := make([][]byte, 1000)
	for i := range msgs {
		msgs[i] = auditgen.Wrap(nil, shape, gen.Append(nil, i), i)
	}
	return msgs
}

// BenchmarkDecodeMessage decodes messages of auditgen's mix: with the
// pre-filter (what Sunset runs), with every event decoded, and as before
// shapes were told by a walk (referenceDecode: the whole message parsed
// into a map first). It reports messages/s and the share of events set
// aside undecoded.
func BenchmarkDecodeMessage(b *testing.B) {
	agg := aggregate.New(aggregate.Options{Logger: zerolog.Nop()})
	cfg := Config{EnvelopeFields: []string{"log", "message"}, NodeField: "hostname"}
	for _, shape := range auditgen.Shapes {
		msgs := benchMessages(shape)
		for _, dec := range []struct {
			name   string
			decode func([]byte) (decoded, string)
		}{
			{"prefilter", newDecoder(cfg, auditjson.NewPrefilter(agg.Interest())).decode},
			{"decode-all", newDecoder(cfg, nil).decode},
			{"map-first", func(v []byte) (decoded, string) { return referenceDecode(newDecoder(cfg, nil), v) }},
		} {
			b.Run(shape+"/"+dec.name, func(b *testing.B) {
				skipped, n := 0, 0
				for b.Loop() {
					for _, m := range msgs {
						out, reason := dec.decode(m)
						if reason != "" {
							b.Fatalf("poison: %s", reason)
						}
						skipped += out.skipped.OtherStage + out.skipped.NotDeprecated
						n++
					}
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
				b.ReportMetric(float64(skipped)/float64(n), "set-aside/msg")
			})
		}
	}
}
