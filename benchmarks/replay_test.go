package benchmarks

import (
	"bufio"
	"bytes"
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

// besideGrepLines is the size of the log replayed beside `grep -c`: about
// 1.2 GB, so that start-up and close weigh little beside the scan.
const besideGrepLines = 1_000_000

// BenchmarkReplayBesideGrep replays a log of 1,000,000 lines, 3 %
// deprecated, with `sunset replay` into a fresh data directory, and runs
// `grep -c k8s.io/deprecated` on the same file just before, both processes
// timed: grep searches the whole buffer for one needle and looks for line
// boundaries only around a match, the floor of any line-oriented reader.
// Each iteration runs both; the benchmark reports both speeds and their
// ratio (sunset/grep), the CPU each process spent a line (user and system,
// rusage: a shared machine slows the clock more than the CPU), and the
// load average when the run ended. grep must find, and Sunset count,
// exactly the deprecated lines.
func BenchmarkReplayBesideGrep(b *testing.B) {
	grep, err := exec.LookPath("grep")
	if err != nil {
		b.Skip("grep is not installed")
	}
	dir := b.TempDir()
	bin := buildSunset(b, dir)
	gen := auditgen.Options{Prefix: "replay-grep", DeprecatedEvery: 33, At: time.Now().UTC().Add(-time.Hour)}
	log := writeLog(b, filepath.Join(dir, "deprecated-3pct.log"), besideGrepLines, gen.Append)
	want := gen.CountDeprecated(0, besideGrepLines)
	// The page cache holds the file for both from the first iteration.
	grepOnce(b, grep, log, want)
	var grepTime, sunsetTime, grepCPU, sunsetCPU time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		gc := grepOnce(b, grep, log, want)
		gt := time.Since(start)
		start = time.Now()
		sc := replayOnceOf(b, bin, log, besideGrepLines, want)
		st := time.Since(start)
		grepTime, grepCPU, sunsetTime, sunsetCPU = grepTime+gt, grepCPU+gc, sunsetTime+st, sunsetCPU+sc
		// Each run on its own, with -v: runs differ with the load.
		b.Logf("run %d: sunset %.0f lines/s (%.2f cpu-us/line), grep %.0f lines/s (%.2f cpu-us/line), sunset/grep %.3f, load average %.2f",
			i+1, besideGrepLines/st.Seconds(), perLine(sc, 1), besideGrepLines/gt.Seconds(), perLine(gc, 1), gt.Seconds()/st.Seconds(), loadAverage())
	}
	b.StopTimer()
	lines := float64(besideGrepLines * b.N)
	grepRate, sunsetRate := lines/grepTime.Seconds(), lines/sunsetTime.Seconds()
	b.ReportMetric(sunsetRate, "lines/s")
	b.ReportMetric(grepRate, "grep-lines/s")
	b.ReportMetric(sunsetRate/grepRate, "sunset/grep")
	b.ReportMetric(perLine(sunsetCPU, b.N), "cpu-us/line")
	b.ReportMetric(perLine(grepCPU, b.N), "grep-cpu-us/line")
	b.ReportMetric(loadAverage(), "loadavg-1m")
}

// perLine is the CPU of runs replays of the log beside grep, a line.
func perLine(cpu time.Duration, runs int) float64 {
	return float64(cpu.Nanoseconds()) / 1e3 / float64(besideGrepLines*runs)
}

// loadAverage is the machine's load average over the last minute, 0 where
// /proc does not say.
func loadAverage() float64 {
	avg, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(bytes.Fields(avg)) == 0 {
		return 0
	}
	one, _ := strconv.ParseFloat(string(bytes.Fields(avg)[0]), 64)
	return one
}

// cpu is the user and system time a finished process spent.
func cpu(c *exec.Cmd) time.Duration {
	return c.ProcessState.UserTime() + c.ProcessState.SystemTime()
}

// grepOnce runs `grep -c k8s.io/deprecated` on log, into a pipe (GNU grep
// stops at the first match when its output is /dev/null), and fails unless
// it finds want lines. It returns the CPU grep spent.
func grepOnce(b *testing.B, grep, log string, want int) time.Duration {
	c := exec.Command(grep, "-c", "k8s.io/deprecated", log)
	out, err := c.Output()
	if err != nil {
		b.Fatalf("grep: %v", err)
	}
	if n, _ := strconv.Atoi(string(bytes.TrimSpace(out))); n != want {
		b.Fatalf("grep found %d lines; the file has %d deprecated", n, want)
	}
	return cpu(c)
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
	replayOnceOf(b, bin, log, replayLines, want)
}

// replayOnceOf is replayOnce of a log of lines events. It returns the CPU
// the process spent.
func replayOnceOf(b *testing.B, bin, log string, lines, want int) time.Duration {
	c := exec.Command(bin, "replay", "--data-dir", b.TempDir(), "--node", "n1", log)
	out, err := c.CombinedOutput()
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
	if counted != want || events != lines {
		b.Fatalf("replay counted %d of %d events; the file has %d deprecated of %d", counted, events, want, lines)
	}
	return cpu(c)
}
