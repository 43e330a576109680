package benchmarks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/testutil/loopback"
	"github.com/kube-sunset/sunset/internal/testutil/querybench"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// How many times a step runs each query: at least scaleMinRequests, then
// until scaleMaxRequests or scaleQueryBudget has passed. A step whose
// answers take seconds is timed 5 times, so its p99 is its slowest.
const (
	scaleMinRequests = 5
	scaleMaxRequests = 100
	scaleQueryBudget = 4 * time.Second
)

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

// scaleQueryCacheBytes is query-cache-bytes at every step: raised, as
// the store's caps are, so that each step's views fit whatever its shape
// (the largest take about 600 MiB); peak RSS shows what they cost.
const scaleQueryCacheBytes = 2 << 30

// startServe runs `sunset serve` on dir: the shipped defaults, with the
// step's caps, scaleQueryCacheBytes, and the /metrics cache off, so that
// every scrape computes its answer (from what the exporter kept of the
// hours, as a server does).
func startServe(b *testing.B, bin, dir string, shape scaleShape) *sunsetProc {
	b.Helper()
	addr := loopback.FreeAddr(b)
	clients, nodes, clusters := storeCaps(shape)
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--listen", addr, "--log-level", "warn")
	cmd.Env = serveEnv("SUNSET_METRICS_REFRESH=0s", "SUNSET_QUERY_CACHE_BYTES="+strconv.Itoa(scaleQueryCacheBytes),
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
// times the three queries over loopback HTTP, one at a time, after a
// first round timed apart: the first of each query reads everything,
// the later ones what the server kept; the process's peak RSS is read
// once it has stopped.
func measureStep(b *testing.B, bin string, f *scaleFill, r *scaleResult) {
	p := startServe(b, bin, f.dir, f.shape)
	p.waitReady(b)
	client := &http.Client{Timeout: 2 * time.Minute}
	get, list, scrape := scaleQueries(f)
	for i, q := range []scaleQuery{get, list, scrape} {
		before := time.Now()
		resp, err := client.Get(p.url + q.path)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r.first[i] = max(r.first[i], time.Since(before))
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
	r.getFloor = append(r.getFloor, timeFloor(b, r.getBytes)...)
	r.listFloor = append(r.listFloor, timeFloor(b, r.listBytes)...)
	// From /proc while it runs, not rusage after: Linux carries the peak
	// RSS of the forking process (this one, with the fills) across exec
	// into the child's rusage.
	r.rssMiB = max(r.rssMiB, procPeakRSSMiB(b, p.cmd.Process.Pid))
	r.load = max(r.load, loadAverage())
	p.stop(b)
}

// timeFloor times, as timeQuery does, GETs of a body of size bytes from
// a server in the test process that only writes bytes it holds: what
// any answer of that size costs over loopback, and the client reading it.
func timeFloor(b *testing.B, size int) querybench.Durations {
	b.Helper()
	body := bytes.Repeat([]byte("x"), size)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	client := &http.Client{Timeout: 2 * time.Minute}
	defer client.CloseIdleConnections()
	lat, _ := timeQuery(b, client, srv.URL, scaleQuery{path: "/", check: func(*testing.B, []byte, time.Time) {}})
	return lat
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
	cfg.QueryCacheBytes = scaleQueryCacheBytes
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
