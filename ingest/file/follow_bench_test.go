package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// benchLines is the mix of the performance targets: ~1.2 KB Metadata
// events, 3 % of them deprecated.
const benchLines = 4000

// discard takes every commit and keeps nothing: the benchmark measures
// the follower's reading and decoding, not the store.
type discard struct{}

func (discard) IngestAt(context.Context, classify.Origin, []classify.Event, ...countkey.Cursor) (classify.Summary, error) {
	return classify.Summary{}, nil
}
func (discard) CountInvalid(string, int)                      {}
func (discard) CountDecodeError(string, string, int)          {}
func (discard) Cursor(string) ([]byte, bool, error)           { return nil, false, nil }
func (discard) CountPrefiltered(string, classify.Prefiltered) {}
func (discard) HeardReads(string, bool)                       {}

// BenchmarkFollowLines reads a file of audit lines to its end as the
// follower does, in full and behind the pre-filter, and reports the CPU a
// line costs (one goroutine: its time is its CPU).
func BenchmarkFollowLines(b *testing.B) {
	gen := auditgen.Options{Prefix: "bench", DeprecatedEvery: 33, At: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	var buf []byte
	for i := range benchLines {
		buf = append(gen.Append(buf, i), '\n')
	}
	path := filepath.Join(b.TempDir(), "audit.log")
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		prefilter *auditjson.Prefilter
	}{{"full", nil}, {"prefilter", auditjson.NewPrefilter(classify.Interest{})}} {
		b.Run(c.name, func(b *testing.B) {
			f := NewFollower(FollowOptions{Path: path, Ingester: discard{}, Cursors: discard{}, Logger: zerolog.Nop(), Prefilter: c.prefilter})
			file, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer file.Close()
			for b.Loop() {
				if _, err := f.readToEnd(context.Background(), file, position{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*benchLines), "cpu-us/event")
		})
	}
}
