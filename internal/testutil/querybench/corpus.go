// Package querybench fills a real store with the query benchmarks' corpus:
// 30 days of one busy deprecated API called by 1,000 pod-bound service
// accounts through 3 apiservers, and about 100 quieter APIs. The data is
// generated at benchmark time into a temporary directory; none of it is
// kept in the repository.
package querybench

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/storetest"
	"github.com/kube-sunset/sunset/store"
)

// MainAPI is the busy API of the corpus.
const MainAPI = "volumeattributesclasses.v1beta1.storage.k8s.io"

// Cluster is the corpus's only cluster.
const Cluster = "default"

// Size is how much traffic the corpus holds.
type Size struct {
	Days  int // hours of history, in days, ending with the current hour
	Users int // clients of MainAPI, each on every node in every hour
	Nodes int
	APIs  int // MainAPI included
}

// IssueSize is the corpus of issue 12: 30 days, 1,000 users x 3 nodes on
// the main API, 100 APIs, about 2.6M series-hours.
var IssueSize = Size{Days: 30, Users: 1000, Nodes: 3, APIs: 100}

// SizeFromEnv is IssueSize with SUNSET_BENCH_DAYS, SUNSET_BENCH_USERS,
// SUNSET_BENCH_NODES and SUNSET_BENCH_APIS overriding its fields, so that a
// quick run can use a smaller store.
func SizeFromEnv() (Size, error) {
	s := IssueSize
	for name, dst := range map[string]*int{"SUNSET_BENCH_DAYS": &s.Days, "SUNSET_BENCH_USERS": &s.Users,
		"SUNSET_BENCH_NODES": &s.Nodes, "SUNSET_BENCH_APIS": &s.APIs} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return s, fmt.Errorf("%s=%q is not a positive whole number", name, v)
			}
			*dst = n
		}
	}
	return s, nil
}

// Username and UserAgent name user u of MainAPI.
func Username(u int) string { return fmt.Sprintf("system:serviceaccount:team-%03d:app-%03d", u%200, u) }
func UserAgent(u int) string {
	return fmt.Sprintf("app-%03d/v1.4.2 (linux/amd64) kubernetes/0f3e2a1", u)
}

// NodeName names apiserver n.
func NodeName(n int) string { return fmt.Sprintf("master-%d", n) }

// otherAPI names the i-th quiet API (1-based).
func otherAPI(i int) string { return fmt.Sprintf("widgets%02d.v1beta1.bench.example.com", i) }

// mainVerbs are the verbs of MainAPI's users: user u uses mainVerbs[u%3].
var mainVerbs = []string{"get", "list", "watch"}

// Requests is how many requests user u of MainAPI makes through each node
// in each hour: a few clients are busy, most call once, as controllers and
// scripts do. Ties are broken by name, so the top users are stable.
func Requests(u int) int { return 1 + 20/(u+1) }

// Fill writes the corpus, ending with the current hour, into s through
// Store.Apply (the path the webhook uses), and returns how many requests
// and series-hours it holds.
func Fill(s *store.Store, size Size, now time.Time) (requests, series int, err error) {
	cur := now.UTC().Truncate(time.Hour)
	hours := size.Days * 24
	batch := make([]countkey.Request, 0, 16384)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := storetest.Apply(s, batch)
		batch = batch[:0]
		return err
	}
	add := func(r countkey.Request) error {
		r.ID = strconv.Itoa(requests)
		requests++
		batch = append(batch, r)
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	}
	for h := hours - 1; h >= 0; h-- {
		hour := cur.Add(-time.Duration(h) * time.Hour)
		day := int(hour.Unix() / 86400)
		for n := range size.Nodes {
			for u := range size.Users {
				k := countkey.CountKey{Cluster: Cluster, API: MainAPI,
					Cell: countkey.Cell{Hour: hour, Node: NodeName(n), Username: Username(u), UserAgent: UserAgent(u),
						Verb: mainVerbs[u%len(mainVerbs)]}}
				// A new pod a day, as a rolling update does. It is recorded
				// once a day, with the client's first request in the hour
				// of day of the current hour on the first node: the record
				// holds the same 10 pods as when every request carries
				// one, and writing the corpus takes a fraction of the time.
				var seen *countkey.Sighting
				if n == 0 && hour.Hour() == cur.Hour() {
					seen = &countkey.Sighting{PodName: fmt.Sprintf("app-%03d-7d9f8b6c5-%s", u, podSuffix(day)), PodNode: fmt.Sprintf("worker-%d", u%20),
						SourceIPs: []string{fmt.Sprintf("10.%d.%d.%d", day%200, u/250, u%250)}, At: hour.Add(time.Duration(u) * time.Second)}
				}
				series++
				for i := range Requests(u) {
					r := countkey.Request{Key: k, RemovedRelease: "1.37"}
					if i == 0 {
						r.Seen = seen
					}
					if err := add(r); err != nil {
						return requests, series, err
					}
				}
			}
		}
		// The quiet APIs: two tools each, on every node, once an hour.
		for i := 1; i < size.APIs; i++ {
			for n := range size.Nodes {
				for t := range 2 {
					tool := (i + t) % 50
					k := countkey.CountKey{Cluster: Cluster, API: otherAPI(i),
						Cell: countkey.Cell{Hour: hour, Node: NodeName(n), Username: fmt.Sprintf("system:serviceaccount:ops:tool-%02d", tool),
							UserAgent: "tool/2.0", Verb: "list"}}
					series++
					if err := add(countkey.Request{Key: k, RemovedRelease: "1.38"}); err != nil {
						return requests, series, err
					}
				}
			}
		}
	}
	return requests, series, flush()
}

// podSuffix is a 5-character generated pod name suffix for a day.
func podSuffix(day int) string {
	const safe = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = safe[day%len(safe)]
		day /= len(safe)
	}
	return string(b)
}

// MainRequests24h is how many requests the corpus holds for MainAPI in the
// last 24 hours (the current hour and the 23 before it), counted from the
// generator's rules rather than from the store.
func MainRequests24h(size Size) int64 {
	var perHour int64
	for u := range size.Users {
		perHour += int64(Requests(u))
	}
	return perHour * int64(size.Nodes) * int64(min(24, size.Days*24))
}

// Durations summarises per-request latencies.
type Durations []time.Duration

// Quantile returns the q-quantile (0 < q <= 1) by the nearest-rank rule.
func (d Durations) Quantile(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
