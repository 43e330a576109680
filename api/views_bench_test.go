package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/querybench"
	"github.com/kube-sunset/sunset/internal/testutil/storetest"
	"github.com/kube-sunset/sunset/systemusers"
)

// BenchmarkViews measures a GET of the busy API over the whole retention
// (since=720h: 30 days of 1,000 users through 3 apiservers in the issue's
// corpus) three ways, each beside read-everything, the read API without
// views, in the same run:
//
//   - kept: nothing counted since the last GET, as a dashboard polling an
//     idle API sees it;
//   - called: one request of the busy API counted in the current hour
//     before each GET, as while the API is being called: the hours before
//     the current one are kept, the current one is read again.
//
// It runs after the query benchmarks (files run in name order), since
// called adds requests to the corpus that their checks would not expect.
func BenchmarkViews(b *testing.B) {
	s := benchStore(b)
	classifier := systemusers.New(nil)
	handler := func(views *api.Views) http.Handler {
		mux := http.NewServeMux()
		api.New(api.Options{Querier: s, Logger: zerolog.Nop(), IsSystem: classifier.IsSystem, Views: views}).Register(mux)
		return mux
	}
	path := fmt.Sprintf("/apis/sunset.dev/v1/apirequestcounts/%s?since=720h", querybench.MainAPI)
	b.Run("read-everything", func(b *testing.B) {
		measureViews(b, handler(nil), path, nil)
	})
	views := handler(api.NewViews(64 << 20))
	b.Run("kept", func(b *testing.B) {
		measureViews(b, views, path, nil)
	})
	id := 0
	b.Run("called", func(b *testing.B) {
		measureViews(b, views, path, func() {
			id++
			_, err := storetest.Apply(s, []countkey.Request{{ID: fmt.Sprintf("views-bench-%d", id),
				Key: countkey.CountKey{Cluster: querybench.Cluster, API: querybench.MainAPI,
					Cell: countkey.Cell{Hour: time.Now().UTC().Truncate(time.Hour), Node: "master-0", Username: querybench.Username(7), UserAgent: querybench.UserAgent(7), Verb: "get"}}}})
			if err != nil {
				b.Fatal(err)
			}
		})
	})
}

// measureViews times GETs of path as measure does, after one untimed
// GET (the one that fills a view), calling before, if set, untimed before
// each.
func measureViews(b *testing.B, h http.Handler, path string, before func()) {
	var lat querybench.Durations
	var size int
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	for b.Loop() {
		if before != nil {
			b.StopTimer()
			before()
			b.StartTimer()
		}
		start := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		lat = append(lat, time.Since(start))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d", path, rec.Code)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(lat.Quantile(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat.Quantile(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(size), "bytes")
}
