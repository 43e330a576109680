package webhook

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// bigItem is an event whose request object is a string of n bytes: the
// size of a whole body in one item.
func bigItem(auditID string, n int) string {
	return `{"auditID":"` + auditID + `","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"endpoints","apiVersion":"v1"},` +
		`"annotations":{"k8s.io/deprecated":"true"},"requestObject":{"data":"` + strings.Repeat("x", n) + `"}}`
}

// tooLargeMessage is what the answer says of an item over the bound.
const tooLargeMessage = "event is over 8388608 bytes; it was skipped unread"

// A batch of 9 whose 5th item is over the item bound: the 8 others count,
// the answer is 200, and the big one is told and counted by its reason.
func TestWebhookRefusesAnItemOverTheBoundAlone(t *testing.T) {
	items := make([]string, 9)
	for i := range items {
		items[i] = deprecatedItem(fmt.Sprintf("good-%d", i), "", "2026-11-21T19:10:00Z")
	}
	items[4] = bigItem("big", 9<<20)
	code, answer, c, reg := postGzip(t, Options{}, gzipped(t, eventList(items...)))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 8, answer.Counted)
	require.Equal(t, 1, answer.Invalid)
	require.Equal(t, []ItemError{{Index: 4, Reason: "too_large", Message: tooLargeMessage}}, answer.Errors)
	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(8), n)
	require.Equal(t, 1.0, decodeErrors(t, reg, "too_large"))
}

// gzipMember is b as one gzip member: members one after another are one
// gzip stream, so a large part common to many bodies is compressed once.
func gzipMember(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return out.Bytes()
}

// The reviewer's attack: 8 bodies at once, each about 60 KB of gzip that
// inflates to one good event and one 60 MiB item. Every body is answered
// 200 with its good event counted and the big item refused; the bodies
// being decoded never hold more than the decode budget between them, and
// those that would have passed it got 429 and came back.
func TestConcurrentHugeItemsStayWithinTheDecodeBudget(t *testing.T) {
	const clients, budget = 8, 32 << 20
	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return hostileNow }, reg)
	h := New(Options{Ingester: c, Tallies: c, Logger: zerolog.Nop(), Registerer: reg, DecodeBudget: budget})
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	big := gzipMember(t, []byte(bigItem("big", 60<<20)+"]}"))
	require.Less(t, len(big), 128<<10)

	// A client answered 429 posts again once another body is answered.
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	answered, refused := 0, 0
	codes := make([]int, clients)
	resps := make([]Response, clients)
	var wg sync.WaitGroup
	for i := range clients {
		head := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + deprecatedItem(fmt.Sprintf("good-%d", i), "", "2026-11-21T19:10:00Z") + ","
		body := append(gzipMember(t, []byte(head)), big...)
		wg.Go(func() {
			for {
				mu.Lock()
				seen := answered
				mu.Unlock()
				req, err := http.NewRequest(http.MethodPost, srv.URL+"/audit/webhook/prod/master-0", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Content-Encoding", "gzip")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				codes[i] = resp.StatusCode
				err = json.NewDecoder(resp.Body).Decode(&resps[i])
				resp.Body.Close()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if resp.StatusCode != http.StatusTooManyRequests {
					answered++
					cond.Broadcast()
					mu.Unlock()
					return
				}
				refused++
				for answered == seen {
					cond.Wait()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range clients {
		require.Equal(t, http.StatusOK, codes[i], "client %d", i)
		require.Equal(t, 1, resps[i].Counted, "client %d", i)
		require.Equal(t, []ItemError{{Index: 1, Reason: "too_large", Message: tooLargeMessage}}, resps[i].Errors)
	}
	n, err := c.Requests("prod", "endpoints.v1", hostileNow, hostileNow)
	require.NoError(t, err)
	require.Equal(t, uint64(clients), n)
	require.Equal(t, float64(clients), decodeErrors(t, reg, "too_large"))
	require.Equal(t, float64(refused), answeredByCode(t, reg)["429"])
	t.Logf("decode budget %d MiB: peak held %.1f MiB; %d answers 429", budget>>20, float64(h.budget.Peak())/(1<<20), refused)
	require.LessOrEqual(t, h.budget.Peak(), int64(budget))
	require.Equal(t, int64(0), h.budget.InUse(), "every body gave back what it held")
}
