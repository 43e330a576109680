package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// hugeRelease is a removed release of 9 MiB: over badger's limit on one
// value (8 MiB), where the API's metadata record would keep it.
var hugeRelease = strings.Repeat("1", 9<<20)

// oversized is the real aggregator over a real store, which hands the
// event whose auditID is "hostile" on with its removed release of 9 MiB
// whatever the decoder made of the annotation: the commit path must hold
// on its own, however the decoder bounds annotations.
type oversized struct{ *ingesttest.Counter }

func (o oversized) Ingest(ctx context.Context, origin classify.Origin, events []classify.Event) (classify.Summary, error) {
	for i := range events {
		if events[i].ID == "hostile" {
			events[i].RemovedRelease = hugeRelease
		}
	}
	return o.Counter.Ingest(ctx, origin, events)
}

// A batch of three good events and one whose k8s.io/removed-release is
// 9 MiB: before, badger refused the record that would keep the release,
// the whole batch was answered 500, and the apiserver retried it and
// dropped it with the three good events. The hostile one is skipped as
// too_large, the three count exactly once, and the batch is answered
// 200, every time the apiserver sends it.
func TestWebhookCountsTheRestOfABatchWithA9MiBRemovedRelease(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return hostileNow }, reg)
	srv := serveWebhook(t, oversized{c}, oversized{c}, 16<<20)

	// The body carries 1 MiB of the release: an event over 8 MiB would be
	// refused by the decoder before the aggregator saw it
	// (TestWebhookRefusesAnItemOverTheBoundAlone). oversized hands the
	// aggregator all 9 MiB.
	release, err := json.Marshal(hugeRelease[:1<<20])
	require.NoError(t, err)
	items := []string{strings.Replace(deprecatedItem("hostile", "", "2026-11-21T19:10:00Z"),
		`"k8s.io/deprecated":"true"`, `"k8s.io/deprecated":"true","k8s.io/removed-release":`+string(release), 1)}
	for i := range 3 {
		items = append(items, deprecatedItem(fmt.Sprintf("good-%d", i), "", "2026-11-21T19:10:00Z"))
	}
	body := eventList(items...)
	require.Greater(t, len(body), 1<<20)
	for try := range 2 {
		code, answer := post(t, srv.URL, body)
		require.Equal(t, http.StatusOK, code, answer)
		require.NotContains(t, answer, "1111111111", "the answer never quotes the value")
		var resp Response
		require.NoError(t, json.Unmarshal([]byte(answer), &resp))
		if try == 0 {
			require.Equal(t, 3, resp.Counted)
		} else {
			require.Equal(t, 0, resp.Counted)
			require.Equal(t, 3, resp.Duplicates)
		}
		require.Equal(t, map[string]int{"too_large": 1}, resp.SkippedBy)
	}
	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
	require.Equal(t, 3.0, events(t, reg, "counted"))
	require.Equal(t, 3.0, events(t, reg, "duplicate"))
	require.Equal(t, 2.0, events(t, reg, "too_large"))
}
