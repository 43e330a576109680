package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/internal/ingesttest"
)

// About 8 KB of gzip inflates to 8 MiB of [1,1,...]: 4,194,304 items that
// are not events. The answer still counts every one and describes ten;
// the webhook keeps nothing per item, and the good events of the batch
// count.
func TestJunkItemsCostACountNotMemory(t *testing.T) {
	const n = 4 << 20
	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return hostileNow }, reg)
	mux := http.NewServeMux()
	New(Options{Ingester: c, Logger: zerolog.Nop(), MaxBodyBytes: 16 << 20}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	good := deprecatedItem("good", "", "2026-11-21T19:10:00.000001Z")
	junk := junkList(n)
	body := append(eventList(good)[:len(eventList(good))-2], ',')
	body = append(body, junk[bytes.IndexByte(junk, '[')+1:]...)
	zipped := gzipped(t, body)
	require.Less(t, len(zipped), 16<<10)

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/audit/webhook/prod/master-0", bytes.NewReader(zipped))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var answer Response
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.NoError(t, resp.Body.Close())
	runtime.ReadMemStats(&after)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.Equal(t, n, answer.Invalid)
	require.Len(t, answer.Errors, 10)
	for i, e := range answer.Errors {
		require.Equal(t, ItemError{Index: i + 1, Reason: "malformed_event", Message: "event is a JSON number, want an object"}, e)
	}
	require.Equal(t, 1, answer.Counted)
	got, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(1), got)
	require.Equal(t, float64(n), events(t, reg, string(aggregate.ResultInvalid)))
	require.Equal(t, float64(n), decodeErrors(t, reg, "malformed_event"))

	// Server and client together; the items were 400 MiB of errors kept,
	// and several GiB allocated, before.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d-byte gzip body of %d bytes, %d invalid items: %d bytes allocated", len(zipped), len(body), n, alloc)
	require.Less(t, alloc, uint64(64<<20))
}

// decodeErrors is sunset_ingest_decode_errors_total of the webhook with
// the given reason.
func decodeErrors(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "sunset_ingest_decode_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == Source && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A body that is all here but decodes slowly is not a slow sender: only
// the time spent waiting for the sender counts against its rate. Eight KB
// of gzip arrive at once, then take far longer than the slack to inflate
// and decode.
func TestSlowDecodingIsNotASlowSender(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return hostileNow }, reg)
	mux := http.NewServeMux()
	New(Options{Ingester: c, Logger: zerolog.Nop(), MaxBodyBytes: 16 << 20,
		MinBodyBytesPerSecond: 1 << 30, BodySlack: 20 * time.Millisecond}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	good := deprecatedItem("good", "", "2026-11-21T19:10:00.000001Z")
	junk := junkList(4 << 20)
	body := append(eventList(good)[:len(eventList(good))-2], ',')
	body = append(body, junk[bytes.IndexByte(junk, '[')+1:]...)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/audit/webhook/prod/master-0", bytes.NewReader(gzipped(t, body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var answer Response
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.NoError(t, resp.Body.Close())
	t.Logf("answered in %s", time.Since(start))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, answer.Counted)
	require.Equal(t, 4<<20, answer.Invalid)
}
