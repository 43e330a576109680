package kafka

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/auditgen"
)

// benchMessages are 1,000 messages of auditgen's mix (3% deprecated) in
// the shape named.
func benchMessages(b *testing.B, shape string) [][]byte {
	gen := auditgen.Options{Prefix: "bench", DeprecatedEvery: 33, At: time.Now()}
	msgs := make([][]byte, 1000)
	for i := range msgs {
		ev := gen.Append(nil, i)
		switch shape {
		case "event":
			msgs[i] = ev
		case "shipper-fields":
			msgs[i] = append([]byte(`{"@timestamp":"2026-11-21T19:10:00.1Z","hostname":"master-`+strconv.Itoa(i%3)+`",`), ev[1:]...)
		case "log-envelope":
			q, err := json.Marshal(string(ev))
			if err != nil {
				b.Fatal(err)
			}
			msgs[i] = append(append([]byte(`{"log":`), q...), `,"stream":"stdout","time":"2026-11-21T19:10:00Z"}`...)
		}
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
	for _, shape := range []string{"event", "shipper-fields", "log-envelope"} {
		msgs := benchMessages(b, shape)
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
