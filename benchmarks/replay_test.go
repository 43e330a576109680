package benchmarks

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kube-sunset/sunset/internal/auditgen"
)

// replayLines is the size of the replayed audit log: about 240 MB.
const replayLines = 200_000

var summaryLine = regexp.MustCompile(`Replayed (\d+) events .*: (\d+) counted`)

// BenchmarkReplay imports an audit log of 200,000 lines (1,000 users, 3 %
// deprecated) into a fresh data directory with `sunset replay`, the whole
// process timed, beside the baseline of reading the same file line by line
// and decoding each with encoding/json into the audit types. Sunset's
// summary must count exactly the deprecated lines the file holds.
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "sunset")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/sunset").CombinedOutput(); err != nil {
		b.Fatalf("building sunset: %v\n%s", err, out)
	}
	gen := auditgen.Options{Prefix: "replay", DeprecatedEvery: 33, At: time.Now().UTC().Add(-time.Hour)}
	log := filepath.Join(dir, "audit.log")
	f, err := os.Create(log)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var line []byte
	for i := range replayLines {
		line = append(gen.Append(line[:0], i), '\n')
		_, _ = w.Write(line)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	_ = f.Close()
	report := func(b *testing.B) {
		b.ReportMetric(float64(replayLines*b.N)/b.Elapsed().Seconds(), "lines/s")
	}

	b.Run("read-and-decode-auditv1", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(log)
			if err != nil {
				b.Fatal(err)
			}
			s := bufio.NewScanner(f)
			s.Buffer(make([]byte, 1<<20), 1<<20)
			for s.Scan() {
				var e auditv1.Event
				if err := json.Unmarshal(s.Bytes(), &e); err != nil {
					b.Fatal(err)
				}
			}
			_ = f.Close()
		}
		report(b)
	})
	b.Run("sunset", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command(bin, "replay", "--data-dir", b.TempDir(), "--node", "n1", log).CombinedOutput()
			if err != nil {
				b.Fatalf("replay: %v", err)
			}
			// "Replayed 200000 events from 1 input in 1.2s: 6061 counted, ..."
			m := summaryLine.FindSubmatch(out)
			if m == nil {
				b.Fatalf("replay printed no summary:\n%s", out)
			}
			events, _ := strconv.Atoi(string(m[1]))
			counted, _ := strconv.Atoi(string(m[2]))
			if want := gen.CountDeprecated(0, replayLines); counted != want || events != replayLines {
				b.Fatalf("replay counted %d of %d events; the file has %d deprecated of %d", counted, events, want, replayLines)
			}
		}
		report(b)
	})
}
