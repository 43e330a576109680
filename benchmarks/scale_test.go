package benchmarks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/loopback"
	"github.com/kube-sunset/sunset/internal/testutil/querybench"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
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

// The steady run: steadyShape's hourly load for steadyDays simulated days
// with a retention of half as many, so that the second half shows whether
// the disk levels off. Deleted hours are freed only when a compaction
// rewrites their tables, which Store.Maintain has badger do once a day
// (Store.Compact); the test is that the disk is level from the first day
// after the retention period on: no day above it by more than
// steadyGrowth. Without the daily compaction the disk rose on for about
// 20 days more, to 2.2 times day 31's (benchmarks/README.md, Scale).
var steadyShape = scaleBase

const (
	steadyDays   = 60
	steadyGrowth = 0.05
)

// steadySweepHours is how often, in simulated hours, the steady run
// deletes expired hours. Store.Maintain does it every hour; every hour
// here would scan the whole store 1,440 times. Every 4 hours, an
// expiring hour's records are at most 4 hours late. A sweep deletes the
// expired keys among 10,000 in one badger transaction, and an API's count
// keys of one hour lie side by side: about 6,600 of them (190 bytes each)
// fill a transaction, and more fail the sweep with ErrTxnTooBig.
const steadySweepHours = 4

// How many times a step runs each query: at least scaleMinRequests, then
// until scaleMaxRequests or scaleQueryBudget has passed. A step whose
// answers take seconds is timed 5 times, so its p99 is its slowest.
const (
	scaleMinRequests = 5
	scaleMaxRequests = 100
	scaleQueryBudget = 4 * time.Second
)

// The targets at the largest step of every dimension, in milliseconds.
const (
	getTargetMs    = 50
	listTargetMs   = 200
	scrapeTargetMs = 200
)

// scaleRetention is the retention the curve's servers run with, the
// default, and the GET's since.
const scaleRetention = store.DefaultRetention

// scaleFills keeps each step's filled data directory for the whole test
// binary, as the query benchmarks keep their corpus: with -count 3 each
// step is measured three times over one fill. TestMain removes them.
var scaleFills struct {
	mu      sync.Mutex
	root    string
	byShape map[scaleShape]*scaleFill
}

func TestMain(m *testing.M) {
	code := m.Run()
	if scaleFills.root != "" {
		_ = os.RemoveAll(scaleFills.root)
	}
	os.Exit(code)
}

// scaleFill is a step's data directory, closed.
type scaleFill struct {
	dir         string
	shape       scaleShape
	first, last time.Time // the hours written
	requests    int64
	seriesHours int64
	took        time.Duration
	disk        int64 // bytes of the directory's files after a close
}

// storeCaps raises the store's caps so that a step keeps every client,
// apiserver and cluster it sends, as its shape says: past the defaults
// (500 clients per API, apiserver and hour; 64 apiservers; 1,000
// clusters) the store would fold the rest into "other".
func storeCaps(shape scaleShape) (clients, nodes, clusters int) {
	return max(store.DefaultMaxClients, 2*shape.Users), max(store.DefaultMaxNodes, shape.Nodes), max(store.DefaultMaxClusters, shape.Clusters)
}

func openScaleStore(dir string, shape scaleShape, retention time.Duration, now func() time.Time) (*store.Store, error) {
	clients, nodes, clusters := storeCaps(shape)
	return store.Open(store.Options{Dir: dir, NoSync: true, Logger: zerolog.Nop(), Retention: retention, Now: now,
		MaxClients: clients, MaxNodes: nodes, MaxClusters: clusters, Merge: aggregate.StoreMerge()})
}

// fillStep writes shape's history, ending with the current hour, into a
// data directory of its own, once per test binary.
func fillStep(b *testing.B, shape scaleShape) *scaleFill {
	b.Helper()
	scaleFills.mu.Lock()
	defer scaleFills.mu.Unlock()
	if f := scaleFills.byShape[shape]; f != nil {
		return f
	}
	if scaleFills.root == "" {
		root, err := os.MkdirTemp("", "sunset-scale-")
		if err != nil {
			b.Fatal(err)
		}
		scaleFills.root, scaleFills.byShape = root, map[scaleShape]*scaleFill{}
	}
	dir, err := os.MkdirTemp(scaleFills.root, "step-")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	s, err := openScaleStore(dir, shape, scaleRetention, nil)
	if err != nil {
		b.Fatal(err)
	}
	last := start.UTC().Truncate(time.Hour)
	first := last.Add(-time.Duration(shape.Days*24-1) * time.Hour)
	w := newHourWriter(s, shape, 16384)
	for h := first; !h.After(last); h = h.Add(time.Hour) {
		if err := w.hour(h, h.Hour() == last.Hour()); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	f := &scaleFill{dir: dir, shape: shape, first: first, last: last, requests: w.requests,
		seriesHours: shape.seriesPerHour() * int64(shape.Days*24), took: time.Since(start)}
	if want := shape.perHour() * int64(shape.Days*24); f.requests != want {
		b.Fatalf("the fill wrote %d requests; %s is %d", f.requests, shape, want)
	}
	f.disk = dirSize(b, dir)
	scaleFills.byShape[shape] = f
	return f
}

// dirSize sums the sizes of the files under dir.
func dirSize(b *testing.B, dir string) int64 {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return size
}

// mainRequests is what the fill holds for the busy API in the hours from
// from to to that are still kept at now: what a query at now must count.
func (f *scaleFill) mainRequests(from, to, now time.Time) int64 {
	hours := int64(0)
	for h := f.first; !h.After(f.last); h = h.Add(time.Hour) {
		// The store keeps an hour for the retention period after its end.
		if !h.Before(from) && !h.After(to) && h.Add(scaleRetention+time.Hour).After(now) {
			hours++
		}
	}
	return hours * f.shape.mainPerNodeHour() * int64(f.shape.Nodes*f.shape.Clusters)
}

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
}

// serveEnv is the test's environment for a `sunset serve`, without the
// benchmarks' own SUNSET_BENCH_* settings, which serve would refuse as
// unknown keys.
func serveEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUNSET_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// startServe runs `sunset serve` on dir: the shipped defaults, with the
// step's caps and the /metrics cache off, so that every scrape scans.
func startServe(b *testing.B, bin, dir string, shape scaleShape) *sunsetProc {
	b.Helper()
	addr := loopback.FreeAddr(b)
	clients, nodes, clusters := storeCaps(shape)
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--listen", addr, "--log-level", "warn")
	cmd.Env = serveEnv("SUNSET_METRICS_REFRESH=0s",
		"SUNSET_MAX_CLIENTS_PER_NODE_HOUR="+strconv.Itoa(clients),
		"SUNSET_MAX_APISERVERS_PER_CLUSTER="+strconv.Itoa(nodes),
		"SUNSET_MAX_STORED_CLUSTERS="+strconv.Itoa(clusters))
	p := &sunsetProc{cmd: cmd, url: "http://" + addr, log: &bytes.Buffer{}}
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

// scaleQueries are the three queries of a step, each with the check of
// its answer: the GET's counts must be exactly what the fill wrote.
type scaleQuery struct {
	path  string
	check func(b *testing.B, body []byte, at time.Time)
}

func scaleQueries(f *scaleFill) (get, list, scrape scaleQuery) {
	get = scaleQuery{
		path: fmt.Sprintf("/apis/sunset.dev/v1/apirequestcounts/%s?since=%s", querybench.MainAPI, hoursParam(scaleRetention)),
		check: func(b *testing.B, body []byte, at time.Time) {
			var obj sunsetv1.APIRequestCount
			if err := json.Unmarshal(body, &obj); err != nil {
				b.Fatal(err)
			}
			cur := at.UTC().Truncate(time.Hour)
			if want := f.mainRequests(cur.Add(-23*time.Hour), cur, at); obj.Status.RequestCount != want {
				b.Fatalf("requestCount %d, the fill wrote %d in the last 24 hours", obj.Status.RequestCount, want)
			}
			if obj.Status.Window == nil {
				b.Fatal("no status.window with since")
			}
			if want := f.mainRequests(cur.Add(-scaleRetention), cur, at); obj.Status.Window.RequestCount != want {
				b.Fatalf("window requestCount %d, the fill wrote %d in the window", obj.Status.Window.RequestCount, want)
			}
		},
	}
	list = scaleQuery{
		path: "/apis/sunset.dev/v1/apirequestcounts",
		check: func(b *testing.B, body []byte, _ time.Time) {
			var l sunsetv1.APIRequestCountList
			if err := json.Unmarshal(body, &l); err != nil {
				b.Fatal(err)
			}
			if len(l.Items) != f.shape.APIs {
				b.Fatalf("%d items, want %d", len(l.Items), f.shape.APIs)
			}
		},
	}
	scrape = scaleQuery{
		path: "/metrics",
		check: func(b *testing.B, body []byte, _ time.Time) {
			if !bytes.Contains(body, []byte(`sunset_deprecated_requests{`)) || !bytes.Contains(body, []byte(`resource="volumeattributesclasses"`)) {
				b.Fatalf("no usage series of %s in the scrape", querybench.MainAPI)
			}
		},
	}
	return get, list, scrape
}

func hoursParam(d time.Duration) string { return strconv.Itoa(int(d/time.Hour)) + "h" }

// timeQuery runs q against url over client and returns each request's
// latency, the body's size, and checks the first and last answers, when
// the hour did not turn while they were asked.
func timeQuery(b *testing.B, client *http.Client, url string, q scaleQuery) (querybench.Durations, int) {
	b.Helper()
	var lat querybench.Durations
	size := 0
	began := time.Now()
	for len(lat) < scaleMinRequests || len(lat) < scaleMaxRequests && time.Since(began) < scaleQueryBudget {
		before := time.Now()
		resp, err := client.Get(url + q.path)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(before)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s %s", q.path, resp.Status, body[:min(len(body), 300)])
		}
		lat = append(lat, took)
		size = len(body)
		if first, last := len(lat) == 1, len(lat) >= scaleMinRequests && (len(lat) == scaleMaxRequests || time.Since(began) >= scaleQueryBudget); first || last {
			if after := time.Now(); before.Truncate(time.Hour).Equal(after.Truncate(time.Hour)) {
				q.check(b, body, after)
			}
		}
	}
	return lat, size
}

// measureStep serves the step's data directory with `sunset serve` and
// times the three queries over loopback HTTP, one at a time, after one
// untimed round; the process's peak RSS is read once it has stopped.
func measureStep(b *testing.B, bin string, f *scaleFill, r *scaleResult) {
	p := startServe(b, bin, f.dir, f.shape)
	p.waitReady(b)
	client := &http.Client{Timeout: 2 * time.Minute}
	get, list, scrape := scaleQueries(f)
	for _, q := range []scaleQuery{get, list, scrape} {
		resp, err := client.Get(p.url + q.path)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// The machine's other work shows in every latency: the step's figures
	// come with the load average when they were taken.
	r.load = max(r.load, loadAverage())
	var lat querybench.Durations
	lat, r.getBytes = timeQuery(b, client, p.url, get)
	r.get = append(r.get, lat...)
	lat, r.listBytes = timeQuery(b, client, p.url, list)
	r.list = append(r.list, lat...)
	lat, r.scrapeBytes = timeQuery(b, client, p.url, scrape)
	r.scrape = append(r.scrape, lat...)
	client.CloseIdleConnections()
	// From /proc while it runs, not rusage after: Linux carries the peak
	// RSS of the forking process (this one, with the fills) across exec
	// into the child's rusage.
	r.rssMiB = max(r.rssMiB, procPeakRSSMiB(b, p.cmd.Process.Pid))
	r.load = max(r.load, loadAverage())
	p.stop(b)
}

// procPeakRSSMiB is a running process's peak resident set (VmHWM).
func procPeakRSSMiB(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmHWM of process %d: %v", pid, err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// profileStep runs the step's queries once more, as many times each,
// against a server in the test process over the same directory, with the
// CPU profile on: serve has no profiling endpoint.
func profileStep(b *testing.B, f *scaleFill, path string) {
	cfg := testserver.Config(b)
	cfg.DataDir = f.dir
	cfg.MaxClientsPerNodeHour, cfg.MaxAPIServersPerCluster, cfg.MaxStoredClusters = storeCaps(f.shape)
	cfg.Metrics.Refresh = 0
	s := testserver.Start(b, cfg, app.Options{})
	defer s.Stop()
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	client := &http.Client{Timeout: 2 * time.Minute}
	get, list, scrape := scaleQueries(f)
	if err := pprof.StartCPUProfile(out); err != nil {
		b.Fatal(err)
	}
	for _, q := range []scaleQuery{get, list, scrape} {
		timeQuery(b, client, s.URL, q)
	}
	pprof.StopCPUProfile()
	b.Logf("CPU profile of the queries in %s", path)
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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

// steadyRun counts shape's hourly load for days simulated days, each hour
// on the store's clock, with a retention of days/2; every
// steadySweepHours it deletes the expired hours as Store.Maintain does
// (Sweep, then the value log's garbage collection), and at the end of each
// day it closes the store and adds up its files. It returns the bytes after each day.
func steadyRun(b *testing.B, shape scaleShape, days int) []int64 {
	retentionDays := days / 2
	retention := time.Duration(retentionDays) * 24 * time.Hour
	dir := b.TempDir()
	start := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	var now time.Time
	clock := func() time.Time { return now }
	s, err := openScaleStore(dir, shape, retention, clock)
	if err != nil {
		b.Fatal(err)
	}
	w := newHourWriter(s, shape, 16384)
	disk := make([]int64, days)
	began := time.Now()
	var swept, uncompacted int
	var sweeping time.Duration
	compactedDay := -1
	for d := range days {
		for hr := range 24 {
			h := start.Add(time.Duration(d*24+hr) * time.Hour)
			now = h.Add(59 * time.Minute)
			if err := w.hour(h, hr == 0); err != nil {
				b.Fatal(err)
			}
			if err := w.flush(); err != nil {
				b.Fatal(err)
			}
			if (hr+1)%steadySweepHours != 0 {
				continue
			}
			sweepStart := time.Now()
			n, err := w.s.Sweep()
			if err != nil {
				b.Fatal(err)
			}
			swept += n
			uncompacted += n
			// As Store.Maintain: once a day, after a sweep that deleted.
			if d > compactedDay && uncompacted > 0 {
				if err := w.s.Compact(); err != nil {
					b.Fatal(err)
				}
				compactedDay, uncompacted = d, 0
			}
			if err := w.s.CollectGarbage(); err != nil {
				b.Fatal(err)
			}
			sweeping += time.Since(sweepStart)
		}
		if err := w.s.Close(); err != nil {
			b.Fatal(err)
		}
		disk[d] = dirSize(b, dir)
		if w.s, err = openScaleStore(dir, shape, retention, clock); err != nil {
			b.Fatal(err)
		}
	}
	// What is kept at the end is exactly the hours of the retention
	// period, and the last hour, kept for the retention period after its
	// end: the sweeps deleted every expired hour and no other.
	last := start.Add(time.Duration(days*24-1) * time.Hour)
	liveHours := int64(retentionDays*24 + 1)
	var kept int64
	for c := range shape.Clusters {
		if err := w.s.ScanCounts(clusterName(c), querybench.MainAPI, start, last, func(_ countkey.CountKey, n uint64) error {
			kept += int64(n)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	if want := liveHours * shape.mainPerNodeHour() * int64(shape.Nodes*shape.Clusters); kept != want {
		b.Fatalf("the store keeps %d requests of %s after %d days; the last %d hours hold %d", kept, querybench.MainAPI, days, liveHours, want)
	}
	if err := w.s.Close(); err != nil {
		b.Fatal(err)
	}
	full, final := disk[retentionDays], disk[days-1]
	drift := float64(final)/float64(full) - 1
	peak := slices.Max(disk[retentionDays:])
	peakGrowth := float64(peak)/float64(full) - 1
	mib := make([]string, days)
	for i, v := range disk {
		mib[i] = strconv.FormatFloat(float64(v)/(1<<20), 'f', 2, 64)
	}
	b.Logf("%s, %d requests an hour for %d days, retention %d days, written and swept in %s (sweeps %s, %d records deleted); disk by day (MiB): %s",
		shape, shape.perHour(), days, retentionDays, time.Since(began).Round(time.Millisecond), sweeping.Round(time.Millisecond), swept, strings.Join(mib, " "))
	b.ReportMetric(float64(disk[retentionDays-1])/(1<<20), fmt.Sprintf("day%d-MiB", retentionDays))
	b.ReportMetric(float64(full)/(1<<20), fmt.Sprintf("day%d-MiB", retentionDays+1))
	b.ReportMetric(float64(final)/(1<<20), fmt.Sprintf("day%d-MiB", days))
	b.ReportMetric(float64(peak)/(1<<20), "peak-after-MiB")
	b.ReportMetric(100*peakGrowth, "peak-growth-%")
	b.ReportMetric(100*drift, "drift-%")
	b.ReportMetric(float64(disk[retentionDays-1])/float64(int64(retentionDays*24)*shape.perHour()), "B/request-full")
	b.ReportMetric(float64(peak)/float64(liveHours*shape.perHour()), "peak-B/live-request")
	b.ReportMetric(0, "ns/op")
	if days >= 2 && peakGrowth > steadyGrowth {
		b.Errorf("the disk's peak over days %d-%d is %d bytes, %.1f%% above day %d's %d: not level within %.0f%%",
			retentionDays+1, days, peak, 100*peakGrowth, retentionDays+1, full, 100*steadyGrowth)
	}
	return disk
}

// scaleTable is the curve as a Markdown table, a row per step.
func scaleTable(results []*scaleResult) string {
	var sb strings.Builder
	sb.WriteString("| step | requests | series-hours | GET since=720h p50 / p99 | list p99 | scrape p99 | GET / list body | serve peak RSS | disk | disk per request | load |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&sb, "| %s=%d | %d | %d | %.1f / %.1f ms | %.1f ms | %.1f ms | %.2f / %.2f MB | %.0f MiB | %.2f MiB | %.0f B | %.1f |\n",
			r.dim, r.value, r.fill.requests, r.fill.seriesHours, ms(r.get.Quantile(0.5)), ms(r.get.Quantile(0.99)),
			ms(r.list.Quantile(0.99)), ms(r.scrape.Quantile(0.99)), float64(r.getBytes)/1e6, float64(r.listBytes)/1e6,
			r.rssMiB, float64(r.fill.disk)/(1<<20), float64(r.fill.disk)/float64(r.fill.requests), r.load)
	}
	return sb.String()
}

// scaleCharts are the panels of scale.svg: each metric against the step's
// factor over the base, a line per dimension, and the steady run's disk by
// day.
func scaleCharts(results []*scaleResult, steady []int64) []chart {
	metric := func(title, unit string, logY bool, target float64, y func(*scaleResult) float64) chart {
		c := chart{title: title, xLabel: "step, times the base (log)", yLabel: unit, logX: true, logY: logY, target: target}
		for _, dim := range scaleDims {
			l := chartLine{name: fmt.Sprintf("%s %d to %d", dim.name, dim.steps[0], dim.steps[len(dim.steps)-1])}
			for _, r := range results {
				if r.dim == dim.name {
					l.xs, l.ys = append(l.xs, r.factor), append(l.ys, y(r))
				}
			}
			c.lines = append(c.lines, l)
		}
		return c
	}
	charts := []chart{
		metric("GET one API, since=720h: p99", "ms (log)", true, getTargetMs, func(r *scaleResult) float64 { return ms(r.get.Quantile(0.99)) }),
		metric("List of every API: p99", "ms (log)", true, listTargetMs, func(r *scaleResult) float64 { return ms(r.list.Quantile(0.99)) }),
		metric("/metrics scrape, uncached: p99", "ms (log)", true, scrapeTargetMs, func(r *scaleResult) float64 { return ms(r.scrape.Quantile(0.99)) }),
		metric("sunset serve: peak RSS", "MiB", false, 0, func(r *scaleResult) float64 { return r.rssMiB }),
		metric("Data directory after a close", "MiB (log)", true, 0, func(r *scaleResult) float64 { return float64(r.fill.disk) / (1 << 20) }),
	}
	if len(steady) > 0 {
		l := chartLine{name: fmt.Sprintf("%d requests an hour", steadyShape.perHour())}
		for d, v := range steady {
			l.xs, l.ys = append(l.xs, float64(d+1)), append(l.ys, float64(v)/(1<<20))
		}
		charts = append(charts, chart{title: fmt.Sprintf("Steady load, %d simulated days", len(steady)), xLabel: "simulated day",
			yLabel: "MiB on disk", lines: []chartLine{l}, markX: float64(len(steady) / 2), markLabel: "retention full"})
	}
	return charts
}
