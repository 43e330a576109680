package benchmarks

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// The memory benchmark's loads: a 30-day backfill where every line counts
// (1,000 users, backfillPerHour lines in each of the 720 hours, about
// 840 MB), and the webhook at full speed for memoryBatches batches (about
// 1.2M events).
const (
	backfillHours   = 30 * 24
	backfillPerHour = 1000
	memoryBatches   = 3000
)

// shippedRuntime is the Go runtime settings of the shipped StatefulSet
// (deploy/kubernetes/base): GOMEMLIMIT from its env, and GOMAXPROCS from
// its CPU limit, which Go reads from the container's cgroup and which is
// set here explicitly, outside a container.
func shippedRuntime(b *testing.B) []string {
	raw, err := os.ReadFile("../deploy/kubernetes/base/statefulset.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var sts appsv1.StatefulSet
	if err := yaml.UnmarshalStrict(raw, &sts); err != nil {
		b.Fatal(err)
	}
	containers := sts.Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == "sunset" })
	if i < 0 {
		b.Fatal("the shipped StatefulSet has no container named sunset")
	}
	c := containers[i]
	var env []string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" || e.Name == "GOGC" {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	if cpu, ok := c.Resources.Limits["cpu"]; ok {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(int(math.Ceil(cpu.AsApproximateFloat64()))))
	}
	return env
}

// peakRSSMiB is the peak resident set of a process that has exited.
func peakRSSMiB(b *testing.B, cmd *exec.Cmd) float64 {
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no rusage for the process")
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}

// writeBackfill writes 30 days of counted requests, oldest first, and
// returns the path and the number of lines.
func writeBackfill(b *testing.B, dir string) (string, int) {
	now := time.Now().UTC().Truncate(time.Hour)
	hours := make([]auditgen.Options, backfillHours)
	for h := range hours {
		ago := time.Duration(backfillHours-h) * time.Hour
		hours[h] = auditgen.Options{Prefix: fmt.Sprintf("backfill-%03d", backfillHours-h), DeprecatedEvery: 1, At: now.Add(-ago + 10*time.Minute)}
	}
	lines := backfillHours * backfillPerHour
	path := writeLog(b, filepath.Join(dir, "backfill.log"), lines, func(dst []byte, i int) []byte {
		return hours[i/backfillPerHour].Append(dst, i%backfillPerHour)
	})
	return path, lines
}

// BenchmarkShippedMemory runs the sunset binary with the shipped
// StatefulSet's runtime settings (GOMEMLIMIT, and GOMAXPROCS from the CPU
// limit) and, as the baseline, with Go's defaults on every core, under two
// loads: a 30-day backfill by `sunset replay` where every line counts, and
// `sunset serve` taking webhook batches at full speed from 4 senders. Each
// reports its speed and the process's peak RSS (peak-rss-MiB, from
// rusage), which the issue holds under 400 MiB, and fails unless every
// count is exact.
func BenchmarkShippedMemory(b *testing.B) {
	dir := b.TempDir()
	bin := buildSunset(b, dir)
	backfill, lines := writeBackfill(b, dir)
	shipped := shippedRuntime(b)
	b.Logf("shipped runtime settings: %v", shipped)
	for _, setting := range []struct {
		name string
		env  []string
	}{{"go-defaults", nil}, {"shipped", shipped}} {
		b.Run("replay-30-days/"+setting.name, func(b *testing.B) {
			var rss float64
			for b.Loop() {
				cmd := exec.Command(bin, "replay", "--data-dir", b.TempDir(), "--node", "n1", backfill)
				cmd.Env = append(os.Environ(), setting.env...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("replay: %v\n%s", err, out)
				}
				m := summaryLine.FindSubmatch(out)
				if m == nil || string(m[1]) != strconv.Itoa(lines) || string(m[2]) != strconv.Itoa(lines) {
					b.Fatalf("replay did not count exactly the %d lines:\n%s", lines, out)
				}
				rss = max(rss, peakRSSMiB(b, cmd))
			}
			b.ReportMetric(float64(lines*b.N)/b.Elapsed().Seconds(), "lines/s")
			b.ReportMetric(rss, "peak-rss-MiB")
		})
		b.Run("webhook-full-speed/"+setting.name, func(b *testing.B) {
			var rss float64
			var events int64
			for b.Loop() {
				p := startProc(b, bin, "", setting.env...)
				p.waitReady(b)
				batches := newLoadBatches(time.Now().UTC())
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: loadSenders}}
				res, err := post(client, p.url+"/audit/webhook/n1", batches, 0, memoryBatches)
				if err != nil {
					b.Fatal(err)
				}
				if got, want := requestCount(b, client, p.url, "endpoints.v1"), res.batches*int64(batches.deprecated); got != want {
					b.Fatalf("Sunset counted %d requests of endpoints.v1; the driver sent %d", got, want)
				}
				events += res.batches * batchEvents
				p.stop(b)
				rss = max(rss, peakRSSMiB(b, p.cmd))
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(rss, "peak-rss-MiB")
		})
	}
}
