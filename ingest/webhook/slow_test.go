package webhook

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/plugin/pkg/audit/buffered"
	realwebhook "k8s.io/apiserver/plugin/pkg/audit/webhook"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// slowServer is the real handler on a real loopback server, taking two
// batches at once, with the test's pacing and hooks.
func slowServer(t *testing.T, opts Options, onBodyWait, onSlot func()) (*httptest.Server, *ingesttest.Counter, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return hostileNow }, reg)
	opts.Ingester, opts.Tallies, opts.Logger, opts.Registerer, opts.MaxInFlight = c, c, zerolog.Nop(), reg, 2
	// One sender may take both: these tests are about slow bodies, not
	// fair shares (share_test.go).
	opts.MaxInFlightPerCredential = 2
	h := New(opts)
	h.onBodyWait, h.onSlot = onBodyWait, onSlot
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, c, reg
}

// dripper is a sender on its own connection that sends a webhook POST's
// headers, announcing a 1000-byte body, and then only the body bytes it
// is told to.
func dripper(t *testing.T, srv *httptest.Server, node, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /audit/webhook/prod/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n%s", node, body)
	require.NoError(t, err)
	return conn
}

// sendThroughRealClient sends n deprecated requests with kube-apiserver's
// own webhook backend, batch mode, to url, and returns once it has
// stopped.
func sendThroughRealClient(t *testing.T, url string, n int) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: sunset\n  cluster:\n    server: "+url+
		"\ncontexts:\n- name: sunset\n  context:\n    cluster: sunset\n    user: apiserver\ncurrent-context: sunset\nusers:\n- name: apiserver\n  user: {}\n"), 0o600))
	delegate, err := realwebhook.NewBackend(kubeconfig, auditv1.SchemeGroupVersion,
		wait.Backoff{Duration: 50 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}, nil)
	require.NoError(t, err)
	b := buffered.NewBackend(delegate, buffered.BatchConfig{BufferSize: 10000, MaxBatchSize: 400, MaxBatchWait: 50 * time.Millisecond,
		ThrottleEnable: true, ThrottleQPS: 10, ThrottleBurst: 15, AsyncDelegate: true})
	stop := make(chan struct{})
	require.NoError(t, b.Run(stop))
	at := metav1.NewMicroTime(hostileNow.Add(-20 * time.Minute))
	for i := range n {
		require.True(t, b.ProcessEvents(&auditinternal.Event{
			Level: auditinternal.LevelMetadata, AuditID: types.UID(fmt.Sprintf("real-%d", i)), Stage: auditinternal.StageResponseComplete,
			Verb: "list", RequestURI: "/api/v1/endpoints", User: authnv1.UserInfo{Username: "alice"},
			ObjectRef:                &auditinternal.ObjectReference{Resource: "endpoints", APIVersion: "v1"},
			RequestReceivedTimestamp: at, StageTimestamp: at, ResponseStatus: &metav1.Status{Code: 200},
			Annotations: map[string]string{"k8s.io/deprecated": "true"},
		}))
	}
	close(stop)
	b.Shutdown()
}

// answered is sunset_webhook_requests_total of one code.
func answered(t *testing.T, reg *prometheus.Registry, code string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "sunset_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Senders whose body never starts hold no slot: five of them wait on
// their connections while a real apiserver's batches are taken at once,
// with two slots.
func TestBodiesThatDoNotStartHoldNoSlot(t *testing.T) {
	waiting := make(chan struct{}, 16)
	srv, c, reg := slowServer(t, Options{BodyStartTimeout: time.Hour}, func() { waiting <- struct{}{} }, nil)
	for i := range 5 {
		dripper(t, srv, fmt.Sprintf("hang-%d", i), "")
	}
	for range 5 {
		<-waiting
	}
	sendThroughRealClient(t, srv.URL+"/audit/webhook/prod/master-0", 7)

	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(7), n)
	// The real client's batches: every one 200, none 429.
	require.Positive(t, answered(t, reg, "200"))
	for _, code := range []string{"400", "408", "413", "429", "500", "503"} {
		require.Zero(t, answered(t, reg, code), code)
	}
}

// Senders that start their bodies and then stall hold a slot only until
// they fall behind the minimum rate: each gets 408 and its slot back, and
// the real apiserver's batches are taken after them.
func TestStalledBodiesLoseTheirSlot(t *testing.T) {
	slots := make(chan struct{}, 16)
	srv, c, reg := slowServer(t, Options{BodySlack: 200 * time.Millisecond, MinBodyBytesPerSecond: 1 << 20}, nil, func() { slots <- struct{}{} })
	conns := []net.Conn{
		dripper(t, srv, "drip-0", `{"kind":"EventList",`),
		dripper(t, srv, "drip-1", `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[1,`),
	}
	for range conns {
		<-slots // both slots are held
	}
	for _, conn := range conns {
		// Blocks until the server answers: no sleep, the deadline is the
		// server's.
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		require.JSONEq(t, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"Timeout","code":408,
			"message":"the body did not start within 10s of the headers, or came slower than 1048576 bytes per second after 200ms of slack; send it again"}`, string(body))
	}
	sendThroughRealClient(t, srv.URL+"/audit/webhook/prod/master-0", 5)
	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(5), n)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_webhook_slow_bodies_total Audit webhook batches answered 408: the body did not start in time, or came slower than min-body-bytes-per-second.
# TYPE sunset_webhook_slow_bodies_total counter
sunset_webhook_slow_bodies_total 2
`), "sunset_webhook_slow_bodies_total"))
	require.Equal(t, 2.0, answered(t, reg, "408"))
	require.Equal(t, 0.0, answered(t, reg, "429"))
}

// A body that does not start at all is answered 408 after the start
// timeout, having held no slot.
func TestBodyThatNeverStartsGets408(t *testing.T) {
	waiting := make(chan struct{}, 1)
	srv, _, reg := slowServer(t, Options{BodyStartTimeout: 100 * time.Millisecond}, func() { waiting <- struct{}{} }, nil)
	conn := dripper(t, srv, "hang", "")
	<-waiting
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	require.Equal(t, 1.0, answered(t, reg, "408"))
}
