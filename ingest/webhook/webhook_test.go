package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
)

// blockingIngester is a hand fake of Ingester whose Ingest waits until
// release is closed, to hold batches in flight.
type blockingIngester struct {
	entered chan struct{}
	release chan struct{}
	err     error
	mu      sync.Mutex
	origins []classify.Origin
}

func (b *blockingIngester) Ingest(_ context.Context, o classify.Origin, events []classify.Event) (classify.Summary, error) {
	b.mu.Lock()
	b.origins = append(b.origins, o)
	b.mu.Unlock()
	if b.entered != nil {
		b.entered <- struct{}{}
		<-b.release
	}
	return classify.Summary{Counted: len(events)}, b.err
}

func (b *blockingIngester) CountInvalid(string, int) {}

func (b *blockingIngester) CountDecodeError(string, string, int) {}

func (b *blockingIngester) CountPrefiltered(string, classify.Prefiltered) {}
func (b *blockingIngester) HeardReads(string, bool)                       {}

func (b *blockingIngester) Plan(o classify.Origin, events []classify.Event) ([]aggregate.Planned, error) {
	out := make([]aggregate.Planned, len(events))
	for i, e := range events {
		out[i] = aggregate.Planned{ID: e.ID, Result: classify.ResultNotDeprecated}
	}
	return out, nil
}

func TestDryRunParameter(t *testing.T) {
	ing := &blockingIngester{}
	srv := newServer(t, ing, 4, nil)
	for query, want := range map[string]int{"?dryRun=All": 200, "?dryRun=all": 400, "?dryRun=": 400, "?dryRun=All&dryRun=All": 400, "?timeout=30s": 200} {
		resp, err := http.Post(srv.URL+"/audit/webhook/n1"+query, "application/json", strings.NewReader(oneEvent))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, query)
	}
	require.Len(t, ing.origins, 1, "only the real POST reached Ingest")
}

const oneEvent = `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"1","stage":"ResponseComplete"}]}`

func newServer(t *testing.T, ing *blockingIngester, maxInFlight int, reg prometheus.Registerer) *httptest.Server {
	mux := http.NewServeMux()
	New(Options{Ingester: ing, Tallies: ing, Logger: zerolog.Nop(), Registerer: reg, MaxInFlight: maxInFlight}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestOverloadAnswers429WithRetryAfter(t *testing.T) {
	ing := &blockingIngester{entered: make(chan struct{}), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	srv := newServer(t, ing, 1, reg)

	first := make(chan int)
	go func() {
		resp, err := http.Post(srv.URL+"/audit/webhook/n1", "application/json", strings.NewReader(oneEvent))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-ing.entered // the first batch holds the only slot

	resp, err := http.Post(srv.URL+"/audit/webhook/n1", "application/json", strings.NewReader(oneEvent))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	close(ing.release)
	require.Equal(t, http.StatusOK, <-first)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_webhook_overloaded_total Audit webhook batches answered 429 because too many were in flight.
# TYPE sunset_webhook_overloaded_total counter
sunset_webhook_overloaded_total 1
`), "sunset_webhook_overloaded_total"))
}

func TestCommitFailureAnswers500AndShutdown503(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		code       int
		retryAfter string
	}{
		{"commit failed", context.DeadlineExceeded, http.StatusInternalServerError, ""},
		{"shutting down", aggregate.ErrStopped, http.StatusServiceUnavailable, "10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, &blockingIngester{err: tc.err}, 1, nil)
			resp, err := http.Post(srv.URL+"/audit/webhook/n1", "application/json", strings.NewReader(oneEvent))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, tc.code, resp.StatusCode)
			require.Equal(t, tc.retryAfter, resp.Header.Get("Retry-After"))
		})
	}
}

func TestOriginFromPathOrPeer(t *testing.T) {
	ing := &blockingIngester{}
	srv := newServer(t, ing, 4, nil)
	for _, path := range []string{"/audit/webhook", "/audit/webhook/master-2", "/audit/webhook/eu-1/master-3"} {
		resp, err := http.Post(srv.URL+path+"?timeout=30s", "application/json; charset=utf-8", strings.NewReader(oneEvent))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	require.Equal(t, []classify.Origin{
		{Source: "webhook", Cluster: "default", Node: "127.0.0.1"},
		{Source: "webhook", Cluster: "default", Node: "master-2"},
		{Source: "webhook", Cluster: "eu-1", Node: "master-3"},
	}, ing.origins)
}
