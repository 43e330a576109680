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

	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// replayLines is the size of the replayed audit log: about 240 MB.
const replayLines = 200_000

var summaryLine = regexp.MustCompile(`Replayed (\d+) events .*: (\d+) counted`)

// BenchmarkReplay imports an audit log of 200,000 lines from 1,000 users
// into a fresh data directory with `sunset replay`, the whole process
// timed, beside the baseline of reading the same file line by line and
// decoding each with encoding/json into the audit types. Two logs: 3 % of
// the lines deprecated (deprecated-3pct), and every line deprecated
// (all-counting), where every line is a request to commit. Sunset's summary
// must count exactly the deprecated lines the file holds.
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	bin := buildSunset(b, dir)
	for _, mix := range []struct {
		name  string
		every int
	}{{"deprecated-3pct", 33}, {"all-counting", 1}} {
		b.Run(mix.name, func(b *testing.B) {
			gen := auditgen.Options{Prefix: "replay-" + mix.name, DeprecatedEvery: mix.every, At: time.Now().UTC().Add(-time.Hour)}
			log := writeLog(b, filepath.Join(dir, mix.name+".log"), replayLines, gen.Append)
			report := func(b *testing.B) {
				b.ReportMetric(float64(replayLines*b.N)/b.Elapsed().Seconds(), "lines/s")
			}
			b.Run("read-and-decode-auditv1", func(b *testing.B) {
				for b.Loop() {
					readAndDecode(b, log)
				}
				report(b)
			})
			b.Run("sunset", func(b *testing.B) {
				for b.Loop() {
					replayOnce(b, bin, log, gen.CountDeprecated(0, replayLines))
				}
				report(b)
			})
		})
	}
}

// buildSunset builds the sunset binary into dir.
func buildSunset(b *testing.B, dir string) string {
	bin := filepath.Join(dir, "sunset")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/sunset").CombinedOutput(); err != nil {
		b.Fatalf("building sunset: %v\n%s", err, out)
	}
	return bin
}

// writeLog writes n events to path, one per line: line appends event i
// to dst.
func writeLog(b *testing.B, path string, n int, line func(dst []byte, i int) []byte) string {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for i := range n {
		buf = append(line(buf[:0], i), '\n')
		_, _ = w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// readAndDecode is the baseline: the file read line by line, each line
// decoded with encoding/json into kube-apiserver's own type.
func readAndDecode(b *testing.B, log string) {
	f, err := os.Open(log)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			b.Fatal(err)
		}
	}
}

// replayOnce runs `sunset replay` of log into a fresh data directory and
// fails unless its summary counts exactly want of replayLines events.
func replayOnce(b *testing.B, bin, log string, want int) {
	out, err := exec.Command(bin, "replay", "--data-dir", b.TempDir(), "--node", "n1", log).CombinedOutput()
	if err != nil {
		b.Fatalf("replay: %v\n%s", err, out)
	}
	// "Replayed 200000 events from 1 input in 1.2s: 6061 counted, ..."
	m := summaryLine.FindSubmatch(out)
	if m == nil {
		b.Fatalf("replay printed no summary:\n%s", out)
	}
	events, _ := strconv.Atoi(string(m[1]))
	counted, _ := strconv.Atoi(string(m[2]))
	if counted != want || events != replayLines {
		b.Fatalf("replay counted %d of %d events; the file has %d deprecated of %d", counted, events, want, replayLines)
	}
}
