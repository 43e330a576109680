package e2e

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// auditIDHeader is the request header whose value kube-apiserver takes as
// the request's auditID.
const auditIDHeader = "Audit-ID"

// The clients that choose their own audit IDs. kube-apiserver copies a
// request's Audit-ID header into the event's auditID as it is, up to its
// 1 MiB limit on headers.
const (
	// dave sends one deprecated request with an Audit-ID of longIDBytes,
	// more than badger takes as a key.
	daveAgent   = "dave-tool/1.0"
	longIDBytes = 70_000
	// erin sends sameIDRequests deprecated requests, all with one Audit-ID.
	erinAgent      = "erin-sync/2.1"
	sameID         = "e2e-constant-audit-id"
	sameIDRequests = 5
)

var (
	longIDClient = clientVerb{"endpoints.v1", "dave", daveAgent, "list"}
	sameIDClient = clientVerb{"volumeattributesclasses.v1beta1.storage.k8s.io", "erin", erinAgent, "list"}
)

// Audit IDs are the caller's to choose. A request with a 70,000-byte one
// and five requests that share one travel in the apiserver's webhook
// batches among ordinary users' deprecated requests. Sunset answers every
// batch 2xx, and counts one per request as the apiserver's audit log does
// (one per ResponseComplete event, not one per auditID): no request is
// lost with a batch, none is merged with another that has its ID.
func TestCallerChosenAuditIDsCountPerRequest(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)

	p := newPKI(t)
	s, token := startSunset(t, sunsetBin, p)
	kubeconfig := webhookKubeconfig(t, p, s.url+"/audit/webhook/"+clusterName+"/"+nodeName, token)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p, kubeconfig)
	tr := prepare(t, a)
	dave, erin := a.as(t, "dave", daveAgent), a.as(t, "erin", erinAgent)
	longID := randomHex(t, longIDBytes)

	ctx := ctxWithin(t, 5*time.Minute)
	// The poller's deprecated reads, 10 a second, are in every batch the
	// apiserver sends (it sends one at least every second), the hostile
	// requests' batches included.
	stopPolling := tr.poll(ctx)
	tr.round(ctx, 0)
	err := dave.CoreV1().RESTClient().Get().Namespace(trafficNS).Resource("endpoints").
		SetHeader(auditIDHeader, longID).Do(ctx).Error()
	must(t, "listing endpoints with a long Audit-ID", err)
	for range sameIDRequests {
		err := erin.StorageV1beta1().RESTClient().Get().Resource("volumeattributesclasses").
			SetHeader(auditIDHeader, sameID).Do(ctx).Error()
		must(t, "listing volumeattributesclasses with a constant Audit-ID", err)
	}
	tr.round(ctx, 1)
	polled := stopPolling()
	t.Logf("the poller read endpoints %d times", polled)

	want := map[clientVerb]counts{longIDClient: {1, 0}, sameIDClient: {sameIDRequests, 0}}
	for k, c := range roundCounts {
		want[k] = counts{2 * c.Requests, 2 * c.DryRuns}
	}
	waitFor(t, "Sunset to count the hostile and the ordinary requests", time.Minute, func() error {
		// A batch refused is retried 10 s later at the earliest: fail at
		// once rather than wait for the retry to hide it.
		if refused := s.refusedBatches(t); len(refused) > 0 {
			t.Fatalf("Sunset refused webhook batches (by code): %v", refused)
		}
		got := sunsetTally(t, s.list(t))
		for k, w := range want {
			if got.byClient[k] != w {
				return fmt.Errorf("%+v: %+v, want %+v", k, got.byClient[k], w)
			}
		}
		return nil
	})

	// The apiserver's own view of its webhook: every POST to Sunset so far
	// was answered 2xx and no batch was dropped.
	sent := a.webhookPosts(t, p.httpsClient(), s)
	for code, n := range sent {
		if !strings.HasPrefix(code, "2") {
			t.Errorf("kube-apiserver: %v webhook POSTs to Sunset ended with %q", n, code)
		}
	}
	if sent["200"] == 0 {
		t.Errorf("kube-apiserver: no webhook POST to Sunset answered 200: %v", sent)
	}

	// Stopping the apiserver flushes its audit buffers: after it exits,
	// its log is complete and nothing is in flight to Sunset.
	a.proc.stop(t, syscall.SIGTERM, 2*time.Minute)
	truth := newTally()
	byID := map[string]int{}
	lines := eachCompleted(t, a.auditLog, func(ev *auditEvent) {
		truth.add(ev)
		if ev.AuditID == longID || ev.AuditID == sameID {
			byID[ev.AuditID]++
		}
	})
	t.Logf("audit log: %d events, %d APIs with deprecated requests", lines, len(truth.byAPI))

	// The audit log holds the requests as the test made them, with the IDs
	// the clients chose, or the comparison below would test nothing.
	if byID[longID] != 1 || byID[sameID] != sameIDRequests {
		t.Errorf("audit log: %d requests with the %d-byte Audit-ID and %d with %q; the test made 1 and %d",
			byID[longID], len(longID), byID[sameID], sameID, sameIDRequests)
	}
	for k, w := range want {
		if truth.byClient[k] != w {
			t.Errorf("audit log %+v: %+v, the test made %+v", k, truth.byClient[k], w)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	s.mustEqual(t, truth)
	answered := s.webhookAnswers(t)
	if refused := s.refusedBatches(t); len(refused) > 0 || answered["200"] == 0 {
		t.Fatalf("Sunset answered the webhook (by code): %v", answered)
	}
	t.Logf("Sunset answered all %v webhook batches 200; before its shutdown flush the apiserver had %v POSTs answered 200 and dropped none",
		answered["200"], sent["200"])
}

// webhookAnswers reads Sunset's sunset_webhook_requests_total: the webhook
// batches it answered, by HTTP status code.
func (s *sunsetServer) webhookAnswers(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range scrape(t, s.client, s.url+"/metrics", "")["sunset_webhook_requests_total"].GetMetric() {
		out[label(m, "code")] += m.GetCounter().GetValue()
	}
	return out
}

// refusedBatches are the webhook batches Sunset answered with other than
// 2xx, by code.
func (s *sunsetServer) refusedBatches(t *testing.T) map[string]float64 {
	t.Helper()
	answered := s.webhookAnswers(t)
	maps.DeleteFunc(answered, func(code string, n float64) bool { return n == 0 || strings.HasPrefix(code, "2") })
	return answered
}

// webhookPosts reads the apiserver's own metrics on its audit webhook: its
// POSTs to Sunset by result (an HTTP code, or "<error>" when none came
// back), and, as "dropped", the events it gave up on after its retries.
func (a *apiserver) webhookPosts(t *testing.T, client *http.Client, s *sunsetServer) map[string]float64 {
	t.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	families := scrape(t, client, a.url+"/metrics", a.tokens["admin"])
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		if label(m, "host") == u.Host && label(m, "method") == http.MethodPost {
			out[label(m, "code")] += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["apiserver_audit_error_total"].GetMetric() {
		if n := m.GetCounter().GetValue(); label(m, "plugin") == "webhook" && n > 0 {
			out["dropped"] += n
		}
	}
	return out
}

// scrape reads a Prometheus text endpoint.
func scrape(t *testing.T, client *http.Client, metricsURL, bearer string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, metricsURL, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", metricsURL, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", metricsURL, err)
	}
	return families
}

// label is the value of a sample's label, "" without it.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
