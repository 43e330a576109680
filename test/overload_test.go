package test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// overloadRSSBound is the most memory the server may use while 16 batches
// of 64 MiB arrive at once: they are decoded as they stream in, an event at
// a time, and request objects no field rule reads are dropped as they come.
const overloadRSSBound = 256 << 20

// status reads a field of /proc/PID/status in bytes, such as VmHWM, the
// peak resident set.
func status(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// kube-apiserver's own webhook client sends 16 batches of 64 MiB at once,
// RequestResponse events of 166 kB each, to a server that takes 8 at a
// time. The others get 429 and come back; every request counts exactly
// once, and the server's memory stays bounded.
func TestOverloadWith64MiBBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	p := startBinary(t, t.TempDir(), "--max-inflight-batches", "8")
	const clients, perBatch = 16, 400
	sum := loadgen(t, "-mode", "burst", "-url", p.url+"/audit/webhook", "-clients", fmt.Sprint(clients),
		"-events", fmt.Sprint(perBatch), "-object-bytes", "166000", "-prefix", "big", "-retry-steps", "10", "-retry", "500ms")()
	require.LessOrEqual(t, sum.BodyBytes, 64<<20, "within the default max-body-bytes")
	require.Greater(t, sum.BodyBytes, 63<<20)
	require.Equal(t, loadSummary{Sent: clients * perBatch, Acked: clients * perBatch, BodyBytes: sum.BodyBytes}, sum)

	require.Equal(t, map[string]int64{"endpoints.v1": clients * perBatch}, counts(t, p.url), "every acknowledged request, once")
	m := scrape(t, p.url, "sunset_")
	answered := m[`sunset_webhook_requests_total{code="200"}`]
	counted, dups := m[`sunset_ingest_events_total{result="counted",source="webhook"}`], m[`sunset_ingest_events_total{result="duplicate",source="webhook"}`]
	require.Equal(t, float64(clients*perBatch), counted)
	require.Equal(t, perBatch*answered, counted+dups, "each 2xx was a batch counted, or one re-sent after a timeout and found to be duplicates")
	require.Equal(t, m[`sunset_webhook_requests_total{code="429"}`], m["sunset_webhook_overloaded_total"])
	peak := status(t, p.cmd.Process.Pid, "VmHWM")
	t.Logf("%d batches of %.1f MiB: %v answered 200, %v answered 429; peak RSS %.0f MiB (bound %d MiB)",
		clients, float64(sum.BodyBytes)/(1<<20), answered, m[`sunset_webhook_requests_total{code="429"}`], float64(peak)/(1<<20), overloadRSSBound>>20)
	require.Less(t, peak, int64(overloadRSSBound))
}
