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

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// junkItems is how many items of junk junkBatch holds.
const junkItems = 4 << 20

// junkBatch is one good deprecated event and then 8 MiB of [1,1,...]:
// 4,194,304 items that are not events, in about 8 KB of gzip.
func junkBatch(t *testing.T) []byte {
	t.Helper()
	good := deprecatedItem("good", "", "2026-11-21T19:10:00.000001Z")
	junk := junkList(junkItems)
	body := append(eventList(good)[:len(eventList(good))-2], ',')
	body = append(body, junk[bytes.IndexByte(junk, '[')+1:]...)
	return gzipped(t, body)
}

// postGzip posts a gzip body to a webhook with opts and a real store, and
// returns the answer's code, the answer and the counter.
func postGzip(t *testing.T, opts Options, zipped []byte) (int, Response, *ingesttest.Counter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return hostileNow }, reg)
	opts.Ingester, opts.Tallies, opts.Logger, opts.MaxBodyBytes = c, c, zerolog.Nop(), 16<<20
	mux := http.NewServeMux()
	New(opts).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/audit/webhook/prod/master-0", bytes.NewReader(zipped))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var answer Response
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode, answer, c, reg
}

// About 8 KB of gzip inflates to 8 MiB of [1,1,...]. The answer still
// counts every item and describes ten; the webhook keeps nothing per item,
// and the good events of the batch count.
func TestJunkItemsCostACountNotMemory(t *testing.T) {
	zipped := junkBatch(t)
	require.Less(t, len(zipped), 16<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code, answer, c, reg := postGzip(t, Options{}, zipped)
	runtime.ReadMemStats(&after)
	require.Equal(t, http.StatusOK, code)

	require.Equal(t, junkItems, answer.Invalid)
	require.Len(t, answer.Errors, 10)
	for i, e := range answer.Errors {
		require.Equal(t, ItemError{Index: i + 1, Reason: "malformed_event", Message: "event is a JSON number, want an object"}, e)
	}
	require.Equal(t, 1, answer.Counted)
	got, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(1), got)
	require.Equal(t, float64(junkItems), events(t, reg, string(classify.ResultInvalid)))
	require.Equal(t, float64(junkItems), decodeErrors(t, reg, "malformed_event"))

	// Server and client together; the items were 400 MiB of errors kept,
	// and several GiB allocated, before.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d-byte gzip body, %d invalid items: %d bytes allocated", len(zipped), junkItems, alloc)
	require.Less(t, alloc, uint64(64<<20))
}

// A body that is all here but decodes slowly is not a slow sender: only
// the time spent waiting for the sender counts against its rate. Eight KB
// of gzip arrive at once, then take far longer than the slack to inflate
// and decode.
func TestSlowDecodingIsNotASlowSender(t *testing.T) {
	start := time.Now()
	code, answer, _, _ := postGzip(t, Options{MinBodyBytesPerSecond: 1 << 30, BodySlack: 20 * time.Millisecond}, junkBatch(t))
	t.Logf("answered in %s", time.Since(start))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 1, answer.Counted)
	require.Equal(t, junkItems, answer.Invalid)
}

// decodeErrors is sunset_ingest_decode_errors_total of the webhook with
// the given reason.
func decodeErrors(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return webhookCounter(t, reg, "sunset_ingest_decode_errors_total", "reason", reason)
}
