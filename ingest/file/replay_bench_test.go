package file

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// replayBenchLines is about 240 MB of the performance targets' mix.
const replayBenchLines = 200_000

// prefilteredDiscard sets aside what cannot count and takes the rest
// without storing it: the benchmark measures replay's reading and
// scanning, not the store.
type prefilteredDiscard struct{ prefilter *auditjson.Prefilter }

func (prefilteredDiscard) Send(_ context.Context, events []classify.Event, _ [][]byte) (classify.Summary, error) {
	return classify.Summary{Counted: len(events)}, nil
}

// BenchmarkReplayScan replays a file of 200,000 lines, 3 % deprecated,
// into a sink that stores nothing: replay's reading, setting aside and
// decoding alone. It fails unless exactly the deprecated lines reach the
// sink.
func BenchmarkReplayScan(b *testing.B) {
	gen := auditgen.Options{Prefix: "bench", DeprecatedEvery: 33, At: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	path := filepath.Join(b.TempDir(), "audit.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for i := range replayBenchLines {
		buf = append(gen.Append(buf[:0], i), '\n')
		_, _ = w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	sink := prefilteredDiscard{prefilter: auditjson.NewPrefilter(classify.Interest{Resources: []string{"nodes"}})}
	want := int64(gen.CountDeprecated(0, replayBenchLines))
	for b.Loop() {
		sum, err := Replay(context.Background(), []Input{{Name: path}}, nil, sink, nil, ReplayOptions{Prefilter: sink.prefilter})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Counted != want || sum.Events != replayBenchLines {
			b.Fatalf("%d of %d events counted, want %d of %d", sum.Counted, sum.Events, want, replayBenchLines)
		}
	}
	b.ReportMetric(float64(replayBenchLines*b.N)/b.Elapsed().Seconds(), "lines/s")
}
