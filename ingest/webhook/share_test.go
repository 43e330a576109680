package webhook

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// heldIngester holds every batch in the committer until the test lets it
// go: each batch says it has arrived on entered, then waits for release;
// once release is closed, batches pass.
type heldIngester struct {
	*ingesttest.Counter
	entered chan string
	release chan struct{}
}

func (h *heldIngester) Ingest(ctx context.Context, o classify.Origin, events []classify.Event) (classify.Summary, error) {
	select {
	case h.entered <- o.Node:
		<-h.release
	case <-h.release: // let go already
	}
	return h.Counter.Ingest(ctx, o, events)
}

// answer is what one POST got.
type answer struct {
	code                int
	retryAfter, message string
}

// One apiserver's credentials hold at most half of the 16 batch slots
// (max-inflight-batches-per-credential's default): with 8 of its batches
// held in the committer, its next ones get 429 at once, while another
// apiserver still gets the other 8 slots. With all 16 taken, every
// apiserver gets the plain "too many batches" 429. Once the batches are
// let go, all 16 are counted and the first apiserver posts again.
func TestOneCredentialHoldsAtMostItsShareOfSlots(t *testing.T) {
	reg := prometheus.NewRegistry()
	held := &heldIngester{Counter: ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return hostileNow }, reg),
		entered: make(chan string), release: make(chan struct{})}
	tokens := Tokens{"tok-a": {Cluster: "prod", Node: "master-a"}, "tok-b": {Cluster: "prod", Node: "master-b"},
		"tok-c": {Cluster: "prod", Node: "master-c"}}
	mux := http.NewServeMux()
	New(Options{Ingester: held, Tallies: held, Logger: zerolog.Nop(), Registerer: reg, Tokens: tokens, MinBodyBytesPerSecond: -1}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var n atomic.Int64
	post := func(token string) answer {
		id := fmt.Sprintf("%s-%d", token, n.Add(1))
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/audit/webhook",
			strings.NewReader(string(eventList(deprecatedItem(id, "", "2026-11-21T19:10:00.000001Z")))))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b)}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string][]int{}
	hold := func(token string, k int) {
		for range k {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := post(token)
				mu.Lock()
				codes[token] = append(codes[token], a.code)
				mu.Unlock()
			}()
		}
		for range k {
			<-held.entered
		}
	}
	overShare := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"TooManyRequests","code":429,` +
		`"message":"these credentials hold 8 of the 16 batch slots already (max-inflight-batches-per-credential), so that other apiservers get the rest; retry after 1s"}`

	hold("tok-a", 8)
	for range 3 {
		a := post("tok-a")
		require.Equal(t, 429, a.code)
		require.Equal(t, "1", a.retryAfter)
		require.JSONEq(t, overShare, a.message)
	}
	hold("tok-b", 8)
	for _, token := range []string{"tok-a", "tok-b", "tok-c"} {
		a := post(token)
		require.Equal(t, 429, a.code, token)
		require.Equal(t, "1", a.retryAfter, token)
		require.Contains(t, a.message, "sunset is handling 16 batches already; retry after 1s", token)
	}

	close(held.release)
	wg.Wait()
	ok := func(k int) []int {
		out := make([]int, k)
		for i := range out {
			out[i] = 200
		}
		return out
	}
	require.Equal(t, map[string][]int{"tok-a": ok(8), "tok-b": ok(8)}, codes)
	require.Equal(t, 200, post("tok-a").code, "its slots are back")
	got, err := held.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(17), got)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_webhook_over_share_total Audit webhook batches answered 429 because their credentials held their share of the batch slots (max-inflight-batches-per-credential) already.
# TYPE sunset_webhook_over_share_total counter
sunset_webhook_over_share_total 3
# HELP sunset_webhook_overloaded_total Audit webhook batches answered 429 because too many were in flight.
# TYPE sunset_webhook_overloaded_total counter
sunset_webhook_overloaded_total 3
`), "sunset_webhook_over_share_total", "sunset_webhook_overloaded_total"))
	require.Equal(t, map[string]float64{"200": 17, "429": 6}, answeredByCode(t, reg))
}

// answeredByCode reads sunset_webhook_requests_total by code, leaving out codes
// never answered.
func answeredByCode(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sunset_webhook_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				out[m.GetLabel()[0].GetValue()] = v
			}
		}
	}
	return out
}

// Without credentials, or with one token for all, each apiserver the path
// names has its own share; a bound token's is its apiserver's, and a
// client certificate's its subject's.
func TestShareKeys(t *testing.T) {
	o := classify.Origin{Cluster: "prod", Node: "master-0"}
	require.Equal(t, "apiserver prod/master-0", credential{}.share(o))
	require.Equal(t, "token prod/master-1", credential{token: &Binding{Cluster: "prod", Node: "master-1"}}.share(o))
	s := newShares(0, 16)
	require.Equal(t, 8, s.max)
	require.Equal(t, 1, newShares(0, 1).max)
	require.Equal(t, 3, newShares(3, 16).max)
	require.True(t, s.take("x"))
	s.give("x")
	require.Empty(t, s.held)
}
