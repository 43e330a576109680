package benchmarks

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-sunset/sunset/internal/testutil/querybench"
	"github.com/kube-sunset/sunset/store"
)

// The scale curve. Every step is the base shape with one dimension grown:
// users of the busy API, apiservers, clusters, or days of history. The
// base is small enough that each dimension's own cost shows.
var scaleBase = scaleShape{Users: 10, Nodes: 3, Clusters: 1, Days: 1, APIs: 10}

// scaleDim is one dimension of the curve and its steps, the first being
// the base's value.
type scaleDim struct {
	name  string
	steps []int
	set   func(*scaleShape, int)
}

var scaleDims = []scaleDim{
	{"users", []int{10, 100, 1000, 10000}, func(s *scaleShape, v int) { s.Users = v }},
	{"apiservers", []int{3, 10, 30, 100}, func(s *scaleShape, v int) { s.Nodes = v }},
	{"clusters", []int{1, 10, 100, 1000}, func(s *scaleShape, v int) { s.Clusters = v }},
	{"days", []int{1, 3, 10, 30}, func(s *scaleShape, v int) { s.Days = v }},
}

// The targets at the largest step of every dimension, in milliseconds.
const (
	getTargetMs    = 50
	listTargetMs   = 200
	scrapeTargetMs = 200
)

// scaleRetention is the retention the curve's servers run with, the
// default, and the GET's since.
const scaleRetention = store.DefaultRetention

// scaleResult is one step's measure.
type scaleResult struct {
	dim         string
	value       int
	factor      float64 // value over the base's
	fill        *scaleFill
	get, list   querybench.Durations
	scrape      querybench.Durations
	getBytes    int
	listBytes   int
	scrapeBytes int
	rssMiB      float64
	load        float64 // the highest 1-minute load average seen while measuring
	// first are the first GET, list and scrape of a server, which read
	// everything: the slowest over the runs.
	first [3]time.Duration
	// getFloor and listFloor time bodies of the GET's and the list's
	// size from a server that only writes them (timeFloor).
	getFloor, listFloor querybench.Durations
}

// scaleMax is SUNSET_BENCH_SCALE_MAX, the largest step to run as a factor
// of the base (10 runs users up to 100, apiservers up to 30, clusters up
// to 10, days up to 10), for a quick run; the whole curve without it.
func scaleMax(b *testing.B) float64 {
	v := os.Getenv("SUNSET_BENCH_SCALE_MAX")
	if v == "" {
		return math.Inf(1)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 1 {
		b.Fatalf("SUNSET_BENCH_SCALE_MAX=%q is not a factor of at least 1", v)
	}
	return f
}

// BenchmarkScale measures how the cost of serving grows with the data, one
// dimension at a time from the base (10 users of the busy API, 3
// apiservers, 1 cluster, 1 day of history, 10 APIs) in steps of about
// x10: users 10 to 10,000, apiservers 3 to 100, clusters 1 to 1,000, days
// 1 to 30. Each step is written once per test binary through Store.Apply
// into a data directory of its own (fsync off, as the query benchmarks'
// corpus), which is then closed and measured (disk-MiB, B/request). Each
// run of a step starts the sunset binary, `sunset serve` with its
// defaults (the /metrics cache off), on that directory and times over
// loopback HTTP the GET of the busy API with since=720h (target p99 <=
// 50 ms at the largest step), the list of every API (<= 200 ms) and the
// scrape (<= 200 ms), and reads the process's peak RSS before stopping
// it. load1 is the machine's load average while it ran.
//
// steady/60-days then counts the base's hourly load (252 requests) for 60
// simulated days on the store's clock with a retention of 30, deleting
// expired hours (Store.Sweep) every steadySweepHours simulated hours,
// compacting once a day as Store.Maintain does, and measuring the closed
// directory at the end of each day: the disk must be level from the
// first day after the retention period on (steadyGrowth).
//
// After the whole curve it writes scale.svg (SUNSET_BENCH_SCALE_SVG
// names another file) and logs the table of benchmarks/README.md's Scale
// section. SUNSET_BENCH_SCALE_MAX caps the steps for a quick run;
// SUNSET_BENCH_SCALE_STEADY_DAYS the steady run's days (0 skips it);
// SUNSET_BENCH_SCALE_CPUPROFILE=<file> also profiles each step's queries
// in the test process, into <file> with the step's name before its
// extension.
func BenchmarkScale(b *testing.B) {
	bin := buildSunset(b, b.TempDir())
	limit := scaleMax(b)
	var results []*scaleResult
	allSteps := 0
	for _, dim := range scaleDims {
		base := dim.steps[0]
		for _, v := range dim.steps {
			allSteps++
			factor := float64(v) / float64(base)
			if factor > limit {
				continue
			}
			shape := scaleBase
			dim.set(&shape, v)
			name := fmt.Sprintf("%s=%d", dim.name, v)
			b.Run(name, func(b *testing.B) {
				f := fillStep(b, shape)
				r := &scaleResult{dim: dim.name, value: v, factor: factor, fill: f}
				for b.Loop() {
					measureStep(b, bin, f, r)
				}
				b.ReportMetric(ms(r.get.Quantile(0.5)), "get-p50-ms")
				b.ReportMetric(ms(r.get.Quantile(0.99)), "get-p99-ms")
				b.ReportMetric(ms(r.list.Quantile(0.99)), "list-p99-ms")
				b.ReportMetric(ms(r.scrape.Quantile(0.99)), "scrape-p99-ms")
				b.ReportMetric(ms(r.getFloor.Quantile(0.99)), "get-floor-p99-ms")
				b.ReportMetric(ms(r.listFloor.Quantile(0.99)), "list-floor-p99-ms")
				b.ReportMetric(ms(r.first[0]), "get-first-ms")
				b.ReportMetric(ms(r.first[1]), "list-first-ms")
				b.ReportMetric(ms(r.first[2]), "scrape-first-ms")
				b.ReportMetric(r.rssMiB, "peak-rss-MiB")
				b.ReportMetric(float64(f.disk)/(1<<20), "disk-MiB")
				b.ReportMetric(float64(f.disk)/float64(f.requests), "B/request")
				b.ReportMetric(float64(f.requests), "requests")
				b.ReportMetric(r.load, "load1")
				b.ReportMetric(0, "ns/op")
				b.Logf("%s: %d requests, %d series-hours, written in %s; %d bytes on disk; GET %d bytes (%d requests), list %d bytes (%d), scrape %d bytes (%d)",
					shape, f.requests, f.seriesHours, f.took.Round(time.Millisecond), f.disk, r.getBytes, len(r.get), r.listBytes, len(r.list), r.scrapeBytes, len(r.scrape))
				if path := os.Getenv("SUNSET_BENCH_SCALE_CPUPROFILE"); path != "" {
					ext := filepath.Ext(path)
					profileStep(b, f, strings.TrimSuffix(path, ext)+"-"+name+ext)
				}
				results = append(results, r)
			})
		}
	}
	days := steadyDays
	if v := os.Getenv("SUNSET_BENCH_SCALE_STEADY_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 0 && n < 4 {
			b.Fatalf("SUNSET_BENCH_SCALE_STEADY_DAYS=%q is not 0 or a whole number of at least 4", v)
		}
		days = n
	}
	var steady []int64
	if days > 0 {
		b.Run(fmt.Sprintf("steady/%d-days", days), func(b *testing.B) {
			for b.Loop() {
				steady = steadyRun(b, steadyShape, days)
			}
		})
	}
	if len(results) == 0 {
		return
	}
	// To stderr, as the query benchmarks' corpus line: a benchmark that
	// only runs others prints no log of its own when it passes.
	fmt.Fprintf(os.Stderr, "scale curve, Markdown:\n%s", scaleTable(results))
	svg := os.Getenv("SUNSET_BENCH_SCALE_SVG")
	if svg == "" && len(results) == allSteps && days == steadyDays && len(steady) == days {
		svg = "scale.svg"
	}
	if svg == "" {
		fmt.Fprintf(os.Stderr, "scale curve: not the whole curve (%d of %d steps, %d steady days): set SUNSET_BENCH_SCALE_SVG to draw it\n", len(results), allSteps, len(steady))
		return
	}
	if err := writeCharts(svg, "Sunset: cost as each dimension grows from the base (10 users, 3 apiservers, 1 cluster, 1 day)",
		scaleCharts(results, steady), 3); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "scale curve: wrote %s\n", svg)
}
