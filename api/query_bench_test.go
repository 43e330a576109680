package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/api"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/exporter"
	"github.com/kube-sunset/sunset/internal/testutil/querybench"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/systemusers"
)

// The query benchmarks share one store, filled once per test binary: the
// issue's corpus takes a minute or two to write. SUNSET_BENCH_DAYS (and
// _USERS, _NODES, _APIS) make it smaller for a quick run.
var corpus struct {
	once             sync.Once
	dir              string
	s                *store.Store
	size             querybench.Size
	requests, series int
	err              error
	baseline         map[string]time.Duration // mean of each baseline, by name
	baselineMu       sync.Mutex
}

func TestMain(m *testing.M) {
	code := m.Run()
	if corpus.s != nil {
		_ = corpus.s.Close()
	}
	if corpus.dir != "" {
		_ = os.RemoveAll(corpus.dir)
	}
	os.Exit(code)
}

func benchStore(b *testing.B) *store.Store {
	b.Helper()
	corpus.once.Do(func() {
		corpus.baseline = map[string]time.Duration{}
		if corpus.size, corpus.err = querybench.SizeFromEnv(); corpus.err != nil {
			return
		}
		if corpus.dir, corpus.err = os.MkdirTemp("", "sunset-querybench-"); corpus.err != nil {
			return
		}
		// More clients per node and hour than the default cap, as the
		// issue's store had.
		corpus.s, corpus.err = store.Open(store.Options{Dir: corpus.dir, NoSync: true, Logger: zerolog.Nop(), MaxClients: 2 * corpus.size.Users, Merge: aggregate.StoreMerge()})
		if corpus.err != nil {
			return
		}
		start := time.Now()
		corpus.requests, corpus.series, corpus.err = querybench.Fill(corpus.s, corpus.size, time.Now())
		// Badger's own Size is refreshed once a minute: the files tell.
		_, allocated, _, _ := dirBytes(corpus.dir)
		fmt.Fprintf(os.Stderr, "query corpus: %+v, %d requests, %d series-hours, written in %s (data directory %d MB on disk, memtables included)\n",
			corpus.size, corpus.requests, corpus.series, time.Since(start).Round(time.Second), allocated>>20)
	})
	if corpus.err != nil {
		b.Fatal(corpus.err)
	}
	return corpus.s
}

// baseline runs scan, a bare store scan of the keys a query reads, and
// remembers its mean so that the query beside it can report the ratio.
func baseline(b *testing.B, name string, scan func() error) {
	for b.Loop() {
		if err := scan(); err != nil {
			b.Fatal(err)
		}
	}
	mean := b.Elapsed() / time.Duration(b.N)
	corpus.baselineMu.Lock()
	corpus.baseline[name] = mean
	corpus.baselineMu.Unlock()
	b.ReportMetric(float64(mean.Microseconds())/1000, "ms/scan")
}

// measure runs req against h, reporting p50 and p99 latency, the body's
// size and the ratio to the baseline of the same name.
func measure(b *testing.B, name string, h http.Handler, path string, check func(body []byte)) {
	var lat querybench.Durations
	var size int
	for b.Loop() {
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		lat = append(lat, time.Since(start))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String()[:min(rec.Body.Len(), 300)])
		}
		if size == 0 && check != nil {
			check(rec.Body.Bytes())
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(lat.Quantile(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat.Quantile(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(size), "bytes")
	corpus.baselineMu.Lock()
	base := corpus.baseline[name]
	corpus.baselineMu.Unlock()
	if base > 0 {
		b.ReportMetric(float64(b.Elapsed()/time.Duration(b.N))/float64(base), "x-scan")
	}
}

// queryHandlers are the read API and /metrics (its cache off) over s, as
// the server builds them.
func queryHandlers(s *store.Store) (apiHandler, metrics http.Handler) {
	classifier := systemusers.New(nil)
	mux := http.NewServeMux()
	api.New(api.Options{Querier: s, Logger: zerolog.Nop(), IsSystem: classifier.IsSystem}).Register(mux)
	reg := prometheus.NewRegistry()
	reg.MustRegister(exporter.New(exporter.Options{Querier: s, IsSystem: classifier.IsSystem}))
	return mux, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// BenchmarkQuery measures the read side on the corpus, each query
// beside a bare scan of the same keys through Store.ScanCounts:
//
//   - get: one APIRequestCount of the busy API (1,000 users x 3 nodes x
//     24 hours), at the default users=10 and at users=100;
//   - list: every API;
//   - scrape: /metrics with its cache off.
func BenchmarkQuery(b *testing.B) {
	s := benchStore(b)
	now := time.Now()
	mux, metrics := queryHandlers(s)

	cur := now.UTC().Truncate(time.Hour)
	day := cur.Add(-23 * time.Hour)
	noop := func(countkey.CountKey, uint64) error { return nil }
	scanAll := func(from time.Time) func() error {
		return func() error {
			for _, info := range s.APIs() {
				if err := s.ScanCounts(info.Cluster, info.API, from, cur, noop); err != nil {
					return err
				}
			}
			return nil
		}
	}
	want := querybench.MainRequests24h(corpus.size)
	checkGet := func(body []byte) {
		var obj sunsetv1.APIRequestCount
		if err := json.Unmarshal(body, &obj); err != nil {
			b.Fatal(err)
		}
		if obj.Status.RequestCount != want {
			b.Fatalf("requestCount %d, want %d", obj.Status.RequestCount, want)
		}
	}

	b.Run("get/scan", func(b *testing.B) {
		baseline(b, "get", func() error { return s.ScanCounts(querybench.Cluster, querybench.MainAPI, day, cur, noop) })
	})
	for _, users := range []int{10, 100} {
		b.Run(fmt.Sprintf("get/users=%d", users), func(b *testing.B) {
			measure(b, "get", mux, fmt.Sprintf("/apis/sunset.dev/v1/apirequestcounts/%s?users=%d", querybench.MainAPI, users), checkGet)
		})
	}
	b.Run("list/scan", func(b *testing.B) { baseline(b, "list", scanAll(day)) })
	b.Run("list", func(b *testing.B) {
		measure(b, "list", mux, "/apis/sunset.dev/v1/apirequestcounts", func(body []byte) {
			var l sunsetv1.APIRequestCountList
			if err := json.Unmarshal(body, &l); err != nil {
				b.Fatal(err)
			}
			if len(l.Items) != corpus.size.APIs {
				b.Fatalf("%d items, want %d", len(l.Items), corpus.size.APIs)
			}
		})
	})
	// The exporter reads the 24-hour window and the hour of grace before it.
	b.Run("scrape/scan", func(b *testing.B) { baseline(b, "scrape", scanAll(day.Add(-time.Hour))) })
	b.Run("scrape", func(b *testing.B) {
		measure(b, "scrape", metrics, "/metrics", func(body []byte) {
			if !strings.Contains(string(body), "sunset_deprecated_requests{") {
				b.Fatal("no usage series in the scrape")
			}
		})
	})
}
