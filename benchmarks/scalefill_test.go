package benchmarks

import (
	"fmt"
	"time"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/querybench"
	"github.com/kube-sunset/sunset/internal/testutil/storetest"
	"github.com/kube-sunset/sunset/store"
)

// scaleShape is the traffic of one step of the scale curve: the query
// benchmarks' corpus (internal/testutil/querybench: its busy API, its
// users and their request rates, its apiserver names) in every one of
// Clusters clusters, with APIs-1 quiet APIs beside the busy one.
// querybench.Fill writes a single cluster and short request IDs, so the
// steps are written here, with auditIDs of kube-apiserver's 36 bytes:
// every counted request keeps its ID as a dedupe mark for the retention
// period, so the ID's length is part of the disk a request costs.
type scaleShape struct {
	Users, Nodes, Clusters, Days, APIs int
}

func (s scaleShape) String() string {
	return fmt.Sprintf("%d users x %d apiservers x %d clusters x %d days, %d APIs", s.Users, s.Nodes, s.Clusters, s.Days, s.APIs)
}

// clusterName names cluster c of a step.
func clusterName(c int) string { return fmt.Sprintf("cluster-%04d", c) }

// quietAPI names the i-th quiet API (1-based).
func quietAPI(i int) string { return fmt.Sprintf("gadgets%02d.v1beta1.scale.example.com", i) }

// scaleVerbs are the busy API's verbs: user u uses scaleVerbs[u%3].
var scaleVerbs = [...]string{"get", "list", "watch"}

// mainPerNodeHour is how many requests the busy API gets through one
// apiserver of one cluster in one hour: querybench.Requests of each user.
func (s scaleShape) mainPerNodeHour() int64 {
	var n int64
	for u := range s.Users {
		n += int64(querybench.Requests(u))
	}
	return n
}

// perHour is how many requests the whole shape counts in one hour: the
// busy API's, and two tools on each quiet API through every apiserver.
func (s scaleShape) perHour() int64 {
	return int64(s.Clusters*s.Nodes) * (s.mainPerNodeHour() + int64(2*(s.APIs-1)))
}

// seriesPerHour is the count keys of one hour.
func (s scaleShape) seriesPerHour() int64 {
	return int64(s.Clusters*s.Nodes) * int64(s.Users+2*(s.APIs-1))
}

// hourWriter writes the requests of whole hours into a store through
// Store.Apply (the path the webhook takes), in transactions of up to
// batchSize requests, each with a fresh auditID.
type hourWriter struct {
	s        *store.Store
	shape    scaleShape
	batch    []countkey.Request
	ids      uint64
	requests int64
}

func newHourWriter(s *store.Store, shape scaleShape, batchSize int) *hourWriter {
	return &hourWriter{s: s, shape: shape, batch: make([]countkey.Request, 0, batchSize)}
}

func (w *hourWriter) add(r countkey.Request) error {
	w.ids++
	// Shaped as kube-apiserver's auditIDs, random UUIDs of 36 bytes, so
	// that the dedupe marks of an hour are spread over all the marks as
	// theirs are, rather than side by side. Each is distinct: hi, a
	// bijection of the counter, is written whole.
	hi, lo := splitmix(w.ids), splitmix(^w.ids)
	r.ID = fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", hi>>32, hi>>16&0xffff, hi&0xfff, 0x8000|hi>>12&0xf<<8|lo&0xff, lo>>8&(1<<48-1))
	w.batch = append(w.batch, r)
	if len(w.batch) == cap(w.batch) {
		return w.flush()
	}
	return nil
}

// splitmix is SplitMix64's output function, a bijection of uint64 that
// scatters consecutive inputs.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func (w *hourWriter) flush() error {
	if len(w.batch) == 0 {
		return nil
	}
	dup, err := storetest.Apply(w.s, w.batch)
	if err != nil {
		return err
	}
	for i, d := range dup {
		if d {
			return fmt.Errorf("request %s of the fill was taken for a duplicate", w.batch[i].ID)
		}
	}
	w.requests += int64(len(w.batch))
	w.batch = w.batch[:0]
	return nil
}

// hour writes every request of hour. When sight is set, each client of the
// busy API is seen once, in its first request through the first
// apiserver, with a pod that changes daily, as a rolling update a day
// does: querybench.Fill records the same once a day.
func (w *hourWriter) hour(hour time.Time, sight bool) error {
	day := int(hour.Unix() / 86400)
	for c := range w.shape.Clusters {
		cluster := clusterName(c)
		for n := range w.shape.Nodes {
			node := querybench.NodeName(n)
			for u := range w.shape.Users {
				k := countkey.CountKey{Cluster: cluster, API: querybench.MainAPI,
					Cell: countkey.Cell{Hour: hour, Node: node, Username: querybench.Username(u), UserAgent: querybench.UserAgent(u),
						Verb: scaleVerbs[u%len(scaleVerbs)]}}
				for i := range querybench.Requests(u) {
					r := countkey.Request{Key: k, RemovedRelease: "1.37"}
					if i == 0 && n == 0 && sight {
						r.Seen = &countkey.Sighting{PodName: fmt.Sprintf("app-%05d-7d9f8b6c5-%05d", u, day%100000),
							PodNode: fmt.Sprintf("worker-%d", u%20), SourceIPs: []string{fmt.Sprintf("10.%d.%d.%d", day%200, u/250%250, u%250)},
							At: hour.Add(time.Duration(u%3600) * time.Second)}
					}
					if err := w.add(r); err != nil {
						return err
					}
				}
			}
			for i := 1; i < w.shape.APIs; i++ {
				for t := range 2 {
					k := countkey.CountKey{Cluster: cluster, API: quietAPI(i),
						Cell: countkey.Cell{Hour: hour, Node: node, Username: fmt.Sprintf("system:serviceaccount:ops:tool-%02d", (i+t)%50),
							UserAgent: "tool/2.0", Verb: "list"}}
					if err := w.add(countkey.Request{Key: k, RemovedRelease: "1.38"}); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}
