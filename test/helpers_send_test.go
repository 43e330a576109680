package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// batch is 100 deprecated requests to an API of its own, so that after a
// crash each batch's API shows whether the batch was committed.
func batch(i int, now time.Time) []byte {
	var items []string
	for j := 0; j < 100; j++ {
		items = append(items, fmt.Sprintf(`{"level":"Metadata","auditID":"b%d-%d","stage":"ResponseComplete","verb":"get","user":{"username":"u%d"},"userAgent":"crash/1.0","objectRef":{"resource":"widgets","apiGroup":"g%d.example","apiVersion":"v1beta1"},"requestReceivedTimestamp":%q,"annotations":{"k8s.io/deprecated":"true"}}`,
			i, j, j%3, i, now.Format(time.RFC3339Nano)))
	}
	return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items, ",") + `]}`)
}

func post(url string, body []byte) (int, error) {
	resp, err := http.Post(url+"/audit/webhook/node-1", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func apiName(i int) string { return fmt.Sprintf("widgets.v1beta1.g%d.example", i) }

// sendConcurrently posts batches 0..n-1, their requests received at now,
// from 4 clients and calls onAck after each 200; it returns which batches
// were acknowledged. A retry sends the same now, as kube-apiserver re-sends
// the same events.
func sendConcurrently(url string, now time.Time, n int, onAck func(acked int64)) []bool {
	acked := make([]bool, n)
	var next, total atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				code, err := post(url, batch(i, now))
				if err != nil {
					return // the server is gone
				}
				if code == http.StatusOK {
					acked[i] = true
					onAck(total.Add(1))
				}
			}
		}()
	}
	wg.Wait()
	return acked
}

// loadSummary is what loadgen prints.
type loadSummary struct {
	Sent, Acked, Failed int64
	BodyBytes           int
}

// loadgen starts loadgen with args; finish closes its stdin and returns
// its summary.
func loadgen(t *testing.T, args ...string) (finish func() loadSummary) {
	t.Helper()
	cmd := exec.Command(loadgenBin, args...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return func() loadSummary {
		t.Helper()
		require.NoError(t, stdin.Close())
		require.NoError(t, cmd.Wait())
		var s loadSummary
		require.NoError(t, json.Unmarshal([]byte(stdout.String()), &s), stdout.String())
		return s
	}
}

// kafkaEvent is one audit event: deprecated ones hit endpoints.v1, the
// rest pods.v1.
func kafkaEvent(id string, user int, deprecated bool, at time.Time) []byte {
	resource, ann := "pods", `"authorization.k8s.io/decision":"allow"`
	if deprecated {
		resource, ann = "endpoints", `"k8s.io/deprecated":"true"`
	}
	return []byte(fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":%q,"stage":"ResponseComplete","verb":"list","user":{"username":"user-%d"},"userAgent":"client/1.0","objectRef":{"resource":%q,"apiVersion":"v1"},"responseStatus":{"code":200},"requestReceivedTimestamp":%q,"annotations":{%s}}`,
		id, user, resource, at.Format(time.RFC3339Nano), ann))
}
