package auditcount

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"
)

// apiRequestCount is the part of an APIRequestCount the checks read,
// decoded here rather than with Sunset's own types.
type apiRequestCount struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		counts
		RemovedRequestCount int64  `json:"removedRequestCount"`
		CurrentHour         hour   `json:"currentHour"`
		Last24h             []hour `json:"last24h"`
	} `json:"status"`
	Items []apiRequestCount `json:"items"`
}

type counts struct {
	RequestCount       int64 `json:"requestCount"`
	SystemRequestCount int64 `json:"systemRequestCount"`
	DryRunCount        int64 `json:"dryRunCount"`
}

type hour struct {
	counts
	ByNode []struct {
		NodeName string `json:"nodeName"`
		Cluster  string `json:"cluster"`
		counts
		ByUser []struct {
			UserName     string `json:"username"`
			UserAgent    string `json:"userAgent"`
			RequestCount int64  `json:"requestCount"`
		} `json:"byUser"`
		ByUserOmitted int `json:"byUserOmitted"`
	} `json:"byNode"`
}

// RequireAPIRequestCounts requires the numbers of an APIRequestCount, or
// of an APIRequestCountList, given as JSON, to be the counts of the
// requests keep accepts (nil: all), now being the server's clock. For
// each API: requestCount, systemRequestCount, removedRequestCount and
// dryRunCount; every hour of last24h (indexed by UTC hour of day) and
// currentHour; every apiserver of each hour; and the byUser entries of
// each, which must be the busiest clients of that apiserver and hour with
// their counts. A list must hold exactly the APIs with counts.
func (c *Counter) RequireAPIRequestCounts(t testing.TB, now time.Time, keep func(Request) bool, doc []byte) {
	t.Helper()
	if keep == nil {
		keep = func(Request) bool { return true }
	}
	var obj apiRequestCount
	if err := json.Unmarshal(doc, &obj); err != nil {
		t.Fatalf("auditcount: %v", err)
	}
	items := []apiRequestCount{obj}
	if obj.Kind == "APIRequestCountList" {
		items = obj.Items
		var got []string
		for _, it := range items {
			got = append(got, it.Metadata.Name)
		}
		want := slices.Sorted(maps.Keys(c.ByAPI(keep)))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("the list holds %v; the requests counted are of %v", got, want)
		}
	}
	day := Last24h(now)
	for _, it := range items {
		name := it.Metadata.Name
		in := func(more ...func(Request) bool) func(Request) bool {
			return And(append([]func(Request) bool{keep, day, func(r Request) bool { return r.API == name }}, more...)...)
		}
		st := it.Status
		c.requireCounts(t, name, st.counts, in())
		if want := c.Count(in(func(r Request) bool { return r.Removed })); st.RemovedRequestCount != want {
			t.Errorf("%s: removedRequestCount is %d; %d requests got a 404 from the removed API", name, st.RemovedRequestCount, want)
		}
		if len(st.Last24h) != 24 {
			t.Errorf("%s: last24h has %d entries", name, len(st.Last24h))
			continue
		}
		cur := now.UTC().Truncate(time.Hour)
		for i, h := range st.Last24h {
			// Index i is the hour of day i: the latest such hour up to now.
			at := cur.Add(-time.Duration((cur.Hour()-i+24)%24) * time.Hour)
			c.requireHour(t, fmt.Sprintf("%s, last24h[%d] (%s)", name, i, at.Format("15:04")), h, in(Hour(at)))
		}
		c.requireHour(t, name+", currentHour", st.CurrentHour, in(Hour(cur)))
	}
}

func (c *Counter) requireCounts(t testing.TB, what string, got counts, keep func(Request) bool) {
	t.Helper()
	want := counts{RequestCount: c.Count(keep),
		SystemRequestCount: c.Count(And(keep, func(r Request) bool { return r.System })),
		DryRunCount:        c.Count(And(keep, func(r Request) bool { return r.DryRun }))}
	if got != want {
		t.Errorf("%s: %+v; the requests counted give %+v", what, got, want)
	}
}

func (c *Counter) requireHour(t testing.TB, what string, h hour, keep func(Request) bool) {
	t.Helper()
	c.requireCounts(t, what, h.counts, keep)
	listedNodes := map[[2]string]bool{}
	for _, n := range h.ByNode {
		listedNodes[[2]string{n.Cluster, n.NodeName}] = true
	}
	for _, r := range c.Requests {
		if keep(r) && !listedNodes[[2]string{r.Cluster, r.Node}] {
			t.Errorf("%s: byNode leaves out %s/%s, which has requests", what, r.Cluster, r.Node)
			break
		}
	}
	for _, n := range h.ByNode {
		node := And(keep, func(r Request) bool { return r.Cluster == n.Cluster && r.Node == n.NodeName })
		where := fmt.Sprintf("%s, node %s/%s", what, n.Cluster, n.NodeName)
		c.requireCounts(t, where, n.counts, node)
		clients := map[[2]string]int64{}
		for _, r := range c.Requests {
			if node(r) {
				clients[[2]string{r.Username, r.UserAgent}]++
			}
		}
		var busiest []int64
		for _, n := range clients {
			busiest = append(busiest, n)
		}
		slices.SortFunc(busiest, func(a, b int64) int { return int(b - a) })
		var listed []int64
		for _, u := range n.ByUser {
			if want := clients[[2]string{u.UserName, u.UserAgent}]; u.RequestCount != want {
				t.Errorf("%s: %s (%s) has %d requests; the requests counted give %d", where, u.UserName, u.UserAgent, u.RequestCount, want)
			}
			listed = append(listed, u.RequestCount)
		}
		if len(listed) > len(busiest) || !slices.Equal(listed, busiest[:len(listed)]) {
			t.Errorf("%s: byUser lists clients with %v requests; the busiest have %v", where, listed, busiest)
		}
		if want := len(clients) - len(n.ByUser); n.ByUserOmitted != want {
			t.Errorf("%s: byUserOmitted is %d; %d clients are not listed", where, n.ByUserOmitted, want)
		}
	}
}

// webhookCounts is the part of a WebhookCount's or a resource's numbers
// the checks read.
type webhookCounts struct {
	RequestCount          int64   `json:"requestCount"`
	CallCount             int64   `json:"callCount"`
	MutationCount         int64   `json:"mutationCount"`
	FailedOpenCount       int64   `json:"failedOpenCount"`
	SlowRequestCount      int64   `json:"slowRequestCount"`
	WebhookLatencySeconds float64 `json:"webhookLatencySeconds"`
}

// counts reads back the counts a webhookCounts gives.
func (j webhookCounts) counts() WebhookCounts {
	return WebhookCounts{Requests: j.RequestCount, Calls: j.CallCount, Mutations: j.MutationCount, FailedOpen: j.FailedOpenCount,
		Slow: j.SlowRequestCount, Latency: time.Duration(math.Round(j.WebhookLatencySeconds * 1e9))}
}

// RequireWebhookCounts requires a WebhookCountList, given as JSON, to hold
// exactly the webhooks and resources the events of the last 24 hours
// before now name, each with their counts: requests, calls, mutations,
// failed-open calls, slow requests and the webhook latency summed. A
// resource listed for several clusters is added up.
func (c *Counter) RequireWebhookCounts(t testing.TB, now time.Time, doc []byte) {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status webhookCounts `json:"status"`
		} `json:"items"`
		Resources []struct {
			Name string `json:"name"`
			webhookCounts
		} `json:"resources"`
	}
	if err := json.Unmarshal(doc, &list); err != nil {
		t.Fatalf("auditcount: %v", err)
	}
	day := Last24h(now)
	recent := &Counter{}
	for _, w := range c.Webhooks {
		if day(Request{Hour: w.Hour}) {
			recent.Webhooks = append(recent.Webhooks, w)
		}
	}
	webhooks, resources := recent.WebhookTotals()
	got := map[string]WebhookCounts{}
	for _, it := range list.Items {
		got[it.Metadata.Name] = it.Status.counts()
	}
	requireWebhookMap(t, "webhook", got, webhooks)
	got = map[string]WebhookCounts{}
	for _, r := range list.Resources {
		sum := got[r.Name]
		sum.Add(r.counts())
		got[r.Name] = sum
	}
	requireWebhookMap(t, "resource", got, resources)
}

func requireWebhookMap(t testing.TB, what string, got, want map[string]WebhookCounts) {
	t.Helper()
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
		t.Errorf("the %ss listed are %v; the events name %v", what, g, w)
	}
	for name, w := range want {
		g := got[name]
		// The API gives latency in seconds, as a float: equal to the
		// microsecond.
		if (g.Latency - w.Latency).Abs() < time.Microsecond {
			g.Latency = w.Latency
		}
		if g != w {
			t.Errorf("%s %s: %+v; the events give %+v", what, name, g, w)
		}
	}
}
