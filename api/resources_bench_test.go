package api_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/querybench"
	"github.com/kube-sunset/sunset/store"
)

// dirBytes sums the files under dir: their sizes, and the blocks they
// take on disk (smaller for sparse files, larger for partly used blocks),
// with the sizes by kind of file (badger's .sst tables, .vlog value log,
// .mem memtables, MANIFEST and the rest).
func dirBytes(dir string) (size, allocated int64, byKind map[string]int64, err error) {
	byKind = map[string]int64{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		byKind[cmp.Or(filepath.Ext(path), filepath.Base(path))] += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		return nil
	})
	return size, allocated, byKind, err
}

// procStatusMB reads a kB field of /proc/self/status (VmHWM, VmRSS), in MB.
func procStatusMB(field string) (float64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", field, err)
		}
		return float64(kb) / 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// serverConfig is the server's configuration over the corpus's directory:
// the defaults, with the client cap the corpus was written with.
func serverConfig() config.Config {
	cfg := config.Default()
	cfg.DataDir = corpus.dir
	cfg.Listen = "127.0.0.1:0"
	cfg.MaxClientsPerNodeHour = 2 * corpus.size.Users
	return cfg
}

// openAsServer opens the corpus's directory with the options the server's
// store.Open gets from its configuration (parts.Open).
func openAsServer(cfg config.Config) (*store.Store, error) {
	return store.Open(store.Options{Dir: cfg.DataDir, Retention: cfg.Retention, Logger: zerolog.Nop(),
		MaxClients: cfg.MaxClientsPerNodeHour, Merge: aggregate.StoreMerge()})
}

// startUntilReady builds and runs a server over cfg's data directory and
// returns how long it took from app.New until /readyz answered 200, and a
// function that stops it (closing the store).
func startUntilReady(cfg config.Config) (time.Duration, func() error, error) {
	start := time.Now()
	a, err := app.New(cfg, app.Options{Logger: zerolog.Nop()})
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stop := func() error { cancel(); return <-done }
	url := "http://" + a.Addr().String() + "/readyz"
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		why := ""
		resp, err := client.Get(url)
		if err != nil {
			why = err.Error()
		} else {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start), stop, nil
			}
			why = resp.Status
		}
		select {
		case err := <-done:
			return 0, func() error { return nil }, fmt.Errorf("the server stopped before it was ready: %w", err)
		case <-time.After(time.Millisecond):
		}
		if time.Since(start) > time.Minute {
			return 0, stop, fmt.Errorf("not ready after %s: %s", time.Since(start).Round(time.Second), why)
		}
	}
}

// queryPass runs each query of BenchmarkQuery once against s and checks
// its answer.
func queryPass(s *store.Store) error {
	mux, metrics := queryHandlers(s)
	get := func(h http.Handler, path string) ([]byte, error) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d", path, rec.Code)
		}
		return rec.Body.Bytes(), nil
	}
	want := querybench.MainRequests24h(corpus.size)
	for _, users := range []int{10, 100} {
		body, err := get(mux, fmt.Sprintf("/apis/sunset.dev/v1/apirequestcounts/%s?users=%d", querybench.MainAPI, users))
		if err != nil {
			return err
		}
		var obj sunsetv1.APIRequestCount
		if err := json.Unmarshal(body, &obj); err != nil {
			return err
		}
		if obj.Status.RequestCount != want {
			return fmt.Errorf("requestCount %d, want %d", obj.Status.RequestCount, want)
		}
	}
	body, err := get(mux, "/apis/sunset.dev/v1/apirequestcounts")
	if err != nil {
		return err
	}
	var l sunsetv1.APIRequestCountList
	if err := json.Unmarshal(body, &l); err != nil {
		return err
	}
	if len(l.Items) != corpus.size.APIs {
		return fmt.Errorf("%d items, want %d", len(l.Items), corpus.size.APIs)
	}
	if body, err = get(metrics, "/metrics"); err != nil {
		return err
	}
	if !strings.Contains(string(body), "sunset_deprecated_requests{") {
		return fmt.Errorf("no usage series in the scrape")
	}
	return nil
}

// BenchmarkResources measures, on the query benchmarks' corpus (filled once
// per run, shared with BenchmarkQuery), what the resource targets
// are about. In each iteration:
//
//   - the store is closed, as the server closes it (badger flushes its
//     memtables), and the files of its directory are added up: their size
//     over the series-hours the generator wrote is B/series-hour (target
//     <= 50), their blocks on disk alloc-B/series-hour;
//   - store.Open with the server's options, timed, then closed: open-ms;
//   - a server (app.New and Run, default configuration on the same
//     directory) from its start until /readyz answers 200, then stopped:
//     ready-ms (target <= 2 s with 30 days of data);
//   - the store reopened and every query of BenchmarkQuery run once.
//
// It then reports the process's peak RSS (VmHWM), peak-rss-MB (target
// <= 300 MB), which includes the fill of the corpus in this process, and
// its RSS after the queries, rss-MB. After the first close the fill's
// memory is returned to the system (debug.FreeOSMemory) and the peak reset
// (/proc/self/clear_refs), so that serve-peak-rss-MB is the peak of the
// opens, the servers and the queries alone. open-ms and ready-ms are the
// medians of the iterations, *-max-ms the slowest.
func BenchmarkResources(b *testing.B) {
	benchStore(b)
	if corpus.series == 0 {
		b.Fatal("the corpus holds no series-hours")
	}
	cfg := serverConfig()
	var opens, readies []time.Duration
	var size, allocated int64
	var hwmFill float64
	hwmReset := false
	for b.Loop() {
		if err := corpus.s.Close(); err != nil {
			b.Fatal(err)
		}
		corpus.s = nil
		// The first measure is the store as the fill left it; later
		// iterations see it after opens and closes.
		if size == 0 {
			var byKind map[string]int64
			var err error
			if size, allocated, byKind, err = dirBytes(corpus.dir); err != nil {
				b.Fatal(err)
			}
			b.Logf("data directory after the fill and a close: %d bytes (%d allocated) for %d series-hours; by kind: %v",
				size, allocated, corpus.series, byKind)
			// The fill's peak is behind: return its memory and start the
			// serving peak from here.
			if hwmFill, err = procStatusMB("VmHWM"); err != nil {
				b.Fatal(err)
			}
			debug.FreeOSMemory()
			if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
				b.Logf("cannot reset the peak RSS (%v): no serve-peak-rss-MB", err)
			} else {
				hwmReset = true
			}
		}

		start := time.Now()
		s, err := openAsServer(cfg)
		if err != nil {
			b.Fatal(err)
		}
		opens = append(opens, time.Since(start))
		if len(s.APIs()) != corpus.size.APIs {
			b.Fatalf("reopened store lists %d APIs, want %d", len(s.APIs()), corpus.size.APIs)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}

		ready, stop, err := startUntilReady(cfg)
		if err != nil {
			b.Fatal(err)
		}
		readies = append(readies, ready)
		if err := stop(); err != nil {
			b.Fatal(err)
		}

		if corpus.s, err = store.Open(store.Options{Dir: corpus.dir, NoSync: true, Logger: zerolog.Nop(), MaxClients: 2 * corpus.size.Users, Merge: aggregate.StoreMerge()}); err != nil {
			b.Fatal(err)
		}
		if err := queryPass(corpus.s); err != nil {
			b.Fatal(err)
		}
	}
	hwm, err := procStatusMB("VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	rss, err := procStatusMB("VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(float64(size)/float64(corpus.series), "B/series-hour")
	b.ReportMetric(float64(allocated)/float64(corpus.series), "alloc-B/series-hour")
	b.ReportMetric(float64(size)/(1<<20), "disk-MB")
	b.ReportMetric(ms(median(opens)), "open-ms")
	b.ReportMetric(ms(slices.Max(opens)), "open-max-ms")
	b.ReportMetric(ms(median(readies)), "ready-ms")
	b.ReportMetric(ms(slices.Max(readies)), "ready-max-ms")
	b.ReportMetric(max(hwmFill, hwm), "peak-rss-MB")
	if hwmReset {
		b.ReportMetric(hwm, "serve-peak-rss-MB")
	}
	b.ReportMetric(rss, "rss-MB")
	b.ReportMetric(0, "ns/op")
}
