package web_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// testNow is the clock of the captured traffic, minutes after its last
// event.
var testNow = ingesttest.CapturedNow

const captured = "../testdata/apiserver-v1.36"

// server is a running Sunset filled with the captured traffic.
type server struct {
	t   *testing.T
	url string
	ts  *testserver.Server
}

// startFilled runs Sunset on a random loopback port with:
//   - cluster default, master-0: the captured webhook bodies (Metadata
//     level: ComponentStatus, Endpoints, a deprecated CRD version, and the
//     apiserver's own Endpoints reads as system:apiserver);
//   - cluster default, master-1: the captured Request-level log (beta APIs
//     removed in 1.37 to 1.39, dry runs);
//   - cluster prod, master-1: a CI deployer's pods on two nodes still
//     calling batch/v1beta1 CronJobs, removed in 1.25, and getting 404s
//     (made here: the captures have no pod-bound tokens).
func startFilled(t *testing.T) *server {
	t.Helper()
	s := start(t, testserver.Config(t))
	s.fill()
	return s
}

// start runs Sunset with cfg at testNow, with no traffic yet.
func start(t *testing.T, cfg config.Config) *server {
	t.Helper()
	ts := testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t), Now: func() time.Time { return testNow }})
	return &server{t: t, url: ts.URL, ts: ts}
}

// fill posts the traffic startFilled describes.
func (s *server) fill() {
	t := s.t
	t.Helper()

	bodies, err := filepath.Glob(filepath.Join(captured, "webhook-metadata-batch", "*.body"))
	require.NoError(t, err)
	require.Len(t, bodies, 8)
	sort.Strings(bodies)
	for _, name := range bodies {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		s.post("/audit/webhook/master-0", b)
	}

	f, err := os.Open(filepath.Join(captured, "request-level-blocking", "audit-log-file.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	var lines [][]byte
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	require.NoError(t, sc.Err())
	for start := 0; start < len(lines); start += 400 {
		end := min(start+400, len(lines))
		s.post("/audit/webhook/master-1", eventList(lines[start:end]))
	}

	var cron [][]byte
	for i, at := range []string{"2026-11-19T10:15:00Z", "2026-11-21T18:05:00Z", "2026-11-21T19:05:00Z", "2026-11-21T19:06:00Z"} {
		pod, node := "deployer-29421180-x7k2p", "worker-1"
		if i%2 == 1 {
			pod, node = "deployer-29421120-q9z4m", "worker-2"
		}
		ev, err := json.Marshal(map[string]any{
			"auditID": fmt.Sprintf("cron-%d", i), "stage": "ResponseComplete", "verb": []string{"list", "create"}[i%2],
			"requestURI": "/apis/batch/v1beta1/namespaces/ci/cronjobs",
			"user": map[string]any{"username": "system:serviceaccount:ci:deployer", "extra": map[string]any{
				"authentication.kubernetes.io/pod-name": []string{pod}, "authentication.kubernetes.io/node-name": []string{node}}},
			"sourceIPs": []string{"10.244.1.9"}, "userAgent": "helm/v3.14.0 (linux/amd64)",
			"objectRef":      map[string]any{"resource": "cronjobs", "apiGroup": "batch", "apiVersion": "v1beta1", "namespace": "ci"},
			"responseStatus": map[string]any{"code": 404}, "requestReceivedTimestamp": at,
		})
		require.NoError(t, err)
		cron = append(cron, ev)
	}
	s.post("/audit/webhook/prod/master-1", eventList(cron))
}

func eventList(items [][]byte) []byte {
	return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + string(bytes.Join(items, []byte(","))) + `]}`)
}

func (s *server) post(path string, body []byte) {
	s.t.Helper()
	resp, err := http.Post(s.url+path, "application/json", bytes.NewReader(body))
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(b))
}

// get reads path and returns the status, headers and body.
func (s *server) get(path string) (int, http.Header, []byte) {
	s.t.Helper()
	resp, err := http.Get(s.url + path)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp.StatusCode, resp.Header, b
}

// apiJSON reads an API path (relative to apis/sunset.dev/v1/) into out.
func apiJSON[T any](s *server, path string, query url.Values) T {
	s.t.Helper()
	u := "/apis/sunset.dev/v1/" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	code, _, body := s.get(u)
	require.Equal(s.t, http.StatusOK, code, string(body))
	var out T
	require.NoError(s.t, json.Unmarshal(body, &out))
	return out
}

// clientTotals adds up an API's last24h per username and user agent, the
// way `sunset report NAME` does, straight from the API object.
func clientTotals(obj sunsetv1.APIRequestCount, withSystem bool) map[[2]string]int64 {
	out := map[[2]string]int64{}
	for _, hour := range obj.Status.Last24h {
		for _, node := range hour.ByNode {
			for _, u := range node.ByUser {
				if u.System && !withSystem {
					continue
				}
				out[[2]string{u.UserName, u.UserAgent}] += u.RequestCount
			}
		}
	}
	return out
}
