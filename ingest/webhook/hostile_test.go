package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// hostileNow is the clock of these tests; their events are of its hour.
var hostileNow = time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)

// deprecatedItem is one completed request to the deprecated core/v1
// Endpoints, as kube-apiserver sends it, with the given auditID, API
// group and requestReceivedTimestamp.
func deprecatedItem(auditID, group, received string) string {
	id, _ := json.Marshal(auditID)
	return `{"auditID":` + string(id) + `,"stage":"ResponseComplete","verb":"list","user":{"username":"alice"},` +
		`"objectRef":{"resource":"endpoints","apiVersion":"v1","apiGroup":"` + group + `"},"requestReceivedTimestamp":"` + received + `",` +
		`"annotations":{"k8s.io/deprecated":"true"}}`
}

func eventList(items ...string) []byte {
	return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items, ",") + `]}`)
}

// hostileServer is the real handler in front of a real aggregator and
// badger store in a temporary directory.
func hostileServer(t *testing.T) (*httptest.Server, *ingesttest.Counter, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return hostileNow }, reg)
	return serveWebhook(t, c, c, 4<<20), c, reg
}

// serveWebhook serves the real handler over ing on a loopback server.
func serveWebhook(t *testing.T, ing Ingester, tallies sink.Tallies, maxBody int64) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	New(Options{Ingester: ing, Tallies: tallies, Logger: zerolog.Nop(), MaxBodyBytes: maxBody}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/audit/webhook/prod/master-0", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// One request with a 70,000-byte Audit-ID (kube-apiserver copies the
// header as is) no longer makes badger refuse the batch: its identity is
// stored as a digest, and all six requests count, once, however often
// the apiserver re-sends the batch.
func TestWebhookCountsABatchWithA70KBAuditID(t *testing.T) {
	srv, c, reg := hostileServer(t)
	items := make([]string, 0, 6)
	for i := range 5 {
		items = append(items, deprecatedItem(fmt.Sprintf("good-%d", i), "", "2026-11-21T19:10:00.000001Z"))
	}
	items = append(items, deprecatedItem(strings.Repeat("A", 70000), "", "2026-11-21T19:10:00.000001Z"))
	body := eventList(items...)
	for range 2 {
		code, answer := post(t, srv.URL, body)
		require.Equal(t, http.StatusOK, code, answer)
		require.NotContains(t, answer, "AAAA", "the answer never quotes the ID")
	}
	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(6), n)
	require.Equal(t, 6.0, events(t, reg, "counted"))
	require.Equal(t, 6.0, events(t, reg, "duplicate"))
}

// A request whose API group no apiserver could send (70,000 bytes, where
// Kubernetes allows 253) cannot be stored without merging it with
// another: it is skipped and counted as too_long, and the other five of
// its batch count.
func TestWebhookSkipsAnUnstorableRequestAndCountsTheRest(t *testing.T) {
	srv, c, reg := hostileServer(t)
	items := make([]string, 0, 6)
	for i := range 5 {
		items = append(items, deprecatedItem(fmt.Sprintf("good-%d", i), "", "2026-11-21T19:10:00Z"))
	}
	items = append(items, deprecatedItem("bad", strings.Repeat("g", 70000), "2026-11-21T19:10:00Z"))
	code, answer := post(t, srv.URL, eventList(items...))
	require.Equal(t, http.StatusOK, code, answer)
	require.NotContains(t, answer, "ggg")
	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(5), n)
	require.Equal(t, 5.0, events(t, reg, "counted"))
	require.Equal(t, 1.0, events(t, reg, "too_long"))
}

// Five requests that share one Audit-ID but were received at different
// instants are five requests; a retried batch still counts once.
func TestWebhookCountsRequestsThatShareAnAuditID(t *testing.T) {
	srv, c, reg := hostileServer(t)
	items := make([]string, 0, 5)
	for i := range 5 {
		items = append(items, deprecatedItem("constant", "", fmt.Sprintf("2026-11-21T19:1%d:00.5Z", i)))
	}
	for range 3 {
		code, answer := post(t, srv.URL, eventList(items...))
		require.Equal(t, http.StatusOK, code, answer)
	}
	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(5), n)
	require.Equal(t, 5.0, events(t, reg, "counted"))
	require.Equal(t, 10.0, events(t, reg, "duplicate"))
}

// events is sunset_ingest_events_total of the webhook with the given
// result.
func events(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	return webhookCounter(t, reg, "sunset_ingest_events_total", "result", result)
}

// webhookCounter is the value of the counter metric of the webhook's
// source whose label is value, 0 if it has none.
func webhookCounter(t *testing.T, reg *prometheus.Registry, metric, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == Source && labels[label] == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
