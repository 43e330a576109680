package api

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/storetest"
	"github.com/kube-sunset/sunset/store"
)

// viewsStore opens a store in a temporary directory, closed when the test
// ends, whose clock reads *now: 19:10 on 2026-11-21 until the test moves
// it.
func viewsStore(t *testing.T) (s *store.Store, now *time.Time, clock func() time.Time) {
	t.Helper()
	now = new(time.Date(2026, 11, 21, 19, 10, 0, 0, time.UTC))
	clock = func() time.Time { return *now }
	s, err := store.Open(store.Options{Dir: t.TempDir(), NoSync: true, Logger: zerolog.Nop(), Now: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, now, clock
}

// scanLog is the store, with the hours each scan reads written down.
type scanLog struct {
	*store.Store
	mu    sync.Mutex
	hours []time.Time
}

func (l *scanLog) ScanCounts(cluster, api string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error {
	l.mu.Lock()
	for h := from; !h.After(to); h = h.Add(time.Hour) {
		l.hours = append(l.hours, h)
	}
	l.mu.Unlock()
	return l.Store.ScanCounts(cluster, api, from, to, fn)
}

// read returns the hours read since the last call, as ranges, and
// forgets them: a scan in parallel parts reads one range in several.
func (l *scanLog) read() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.SortFunc(l.hours, time.Time.Compare)
	var out []string
	for i := 0; i < len(l.hours); {
		j := i
		for j+1 < len(l.hours) && l.hours[j+1].Equal(l.hours[j].Add(time.Hour)) {
			j++
		}
		out = append(out, l.hours[i].Format("01-02T15")+"/"+l.hours[j].Format("01-02T15"))
		i = j + 1
	}
	l.hours = nil
	return out
}

// Whatever is counted, deleted or asked for, in whatever order, a service
// that keeps views answers exactly as one that reads everything every time:
// with room for every view, and with room for few, so that views are let
// go of while others are read.
func TestViewsAnswerAsReadingEverything(t *testing.T) {
	for _, budget := range []int64{1 << 30, 40 << 10} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) { testViewsAnswerAsReadingEverything(t, budget) })
	}
}

func testViewsAnswerAsReadingEverything(t *testing.T, budget int64) {
	s, now, clock := viewsStore(t)
	plain := NewService(s, nil, nil, func(u string) bool { return u == "user-0" }, clock)
	kept := NewService(s, nil, nil, func(u string) bool { return u == "user-0" }, clock)
	views := NewViews(budget)
	kept.WithViews(views)

	rng := rand.New(rand.NewPCG(42, 7))
	apis := []string{"flowschemas.v1beta3.flowcontrol.apiserver.k8s.io", "endpoints.v1", "cronjobs.v1beta1.batch"}
	clusters := []string{"c1", "c2", "c3"}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	id := 0
	count := func() {
		var reqs []countkey.Request
		for range 1 + rng.IntN(40) {
			id++
			ago := 0
			switch rng.IntN(10) {
			case 0:
				ago = rng.IntN(24 * 30) // late or replayed
			case 1:
				ago = 1
			}
			hour := now.Truncate(time.Hour).Add(-time.Duration(ago) * time.Hour)
			r := countkey.Request{ID: fmt.Sprint(id), RemovedRelease: "1.37",
				Key: countkey.CountKey{Cluster: pick(clusters), API: pick(apis), Removed: rng.IntN(5) == 0,
					Cell: countkey.Cell{Hour: hour, Node: fmt.Sprintf("m%d", rng.IntN(3)),
						Username: fmt.Sprintf("user-%d", rng.IntN(12)), UserAgent: fmt.Sprintf("agent/%d", rng.IntN(2)),
						Verb: []string{"get", "list", "watch"}[rng.IntN(3)], DryRun: rng.IntN(8) == 0}}}
			if u := rng.IntN(6); u < 3 {
				// Clients that status.workloads describes.
				r.Key.Username = fmt.Sprintf("system:serviceaccount:ns:app-%d", u)
				r.Seen = &countkey.Sighting{PodName: fmt.Sprintf("app-%d-7d9f8b6c5-x2kqz", u), PodNode: "worker-1", At: hour}
			}
			reqs = append(reqs, r)
		}
		_, err := storetest.Apply(s, reqs)
		require.NoError(t, err)
	}
	query := func() sunsetv1.Query {
		q := sunsetv1.DefaultQuery()
		q.Users = []int{0, 1, 3, 10}[rng.IntN(4)]
		if q.Users == 0 {
			q.Users = sunsetv1.DefaultUsersToReport
		}
		if rng.IntN(3) == 0 {
			q.Cluster = pick(clusters)
		}
		if since := []int{0, 1, 5, 48, 720}[rng.IntN(5)]; since > 0 {
			q.Since = time.Duration(since) * time.Hour
			q.Hourly = rng.IntN(2) == 0
		}
		if rng.IntN(4) == 0 {
			q.User = fmt.Sprintf("user-%d", rng.IntN(14))
		}
		return q
	}
	for step := range 600 {
		switch rng.IntN(10) {
		case 0, 1, 2:
			count()
		case 3:
			if rng.IntN(6) == 0 {
				_, err := s.DeleteAPI(pick(clusters), pick(apis), false)
				require.NoError(t, err)
			}
		case 4:
			*now = now.Add(time.Duration(rng.IntN(50)) * time.Minute)
		case 5, 6:
			q := query()
			want, err := plain.List(q)
			require.NoError(t, err)
			got, err := kept.List(q)
			require.NoError(t, err)
			require.Equal(t, want, got, "step %d: list %+v", step, q)
		default:
			name, q := pick(apis), query()
			want, wantErr := plain.Get(name, q)
			got, err := kept.Get(name, q)
			require.Equal(t, wantErr, err)
			require.Equal(t, want, got, "step %d: get %s %+v", step, name, q)
		}
		require.LessOrEqual(t, views.used, budget)
	}
}

func TestViewsReadOnlyWhatMayHaveChanged(t *testing.T) {
	s, now, clock := viewsStore(t)
	cur := now.Truncate(time.Hour)
	q := &scanLog{Store: s}
	svc := NewService(q, nil, nil, nil, clock)
	svc.WithViews(NewViews(1 << 30))
	id := 0
	count := func(hour time.Time) {
		t.Helper()
		id++
		_, err := storetest.Apply(s, []countkey.Request{{ID: fmt.Sprint(id),
			Key: countkey.CountKey{Cluster: "c1", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour, Node: "m0", Username: "alice", Verb: "get"}}}})
		require.NoError(t, err)
	}
	get := func(want int64) []string {
		t.Helper()
		query := sunsetv1.DefaultQuery()
		query.Since = 720 * time.Hour
		obj, err := svc.Get("endpoints.v1", query)
		require.NoError(t, err)
		require.Equal(t, want, obj.Status.Window.RequestCount)
		return q.read()
	}
	count(cur.Add(-100 * time.Hour))
	count(cur)
	require.Equal(t, []string{"10-22T19/11-21T19"}, get(2), "the first query reads the window")
	require.Empty(t, get(2), "nothing counted since: nothing read")
	count(cur)
	require.Equal(t, []string{"11-21T19/11-21T19"}, get(3), "counted in the current hour: that hour alone is read")
	count(cur.Add(-5 * time.Hour))
	require.Equal(t, []string{"10-22T19/11-21T19"}, get(4), "a late request: everything is read again")
	*now = now.Add(time.Hour)
	require.Equal(t, []string{"10-22T19/10-22T19", "11-21T20/11-21T20"}, get(4),
		"a new hour: the hour that leaves the window is read again to take it out, and the new one is read")
	count(cur.Add(time.Hour))
	*now = now.Add(time.Hour)
	require.Equal(t, []string{"10-22T20/10-22T20", "11-21T20/11-21T21"}, get(5),
		"counted in the hour that was current: it is read again too")
	count(cur)
	*now = now.Add(time.Hour)
	require.Equal(t, []string{"10-22T22/11-21T22"}, get(6), "a late request, then a new hour: everything is read")
}

// Queries of one view at once wait for each other, and all get the answer.
func TestViewsServeQueriesAtOnce(t *testing.T) {
	s, now, clock := viewsStore(t)
	var reqs []countkey.Request
	for i := range 200 {
		reqs = append(reqs, countkey.Request{ID: fmt.Sprint(i), Key: countkey.CountKey{Cluster: "c1", API: "endpoints.v1",
			Cell: countkey.Cell{Hour: now.Truncate(time.Hour).Add(-time.Duration(i%30) * time.Hour), Node: fmt.Sprintf("m%d", i%3),
				Username: fmt.Sprintf("system:serviceaccount:ns:app-%d", i%17), Verb: "get"}}})
	}
	_, err := storetest.Apply(s, reqs)
	require.NoError(t, err)
	q := sunsetv1.DefaultQuery()
	q.Since = 48 * time.Hour
	want, err := NewService(s, nil, nil, nil, clock).Get("endpoints.v1", q)
	require.NoError(t, err)
	kept := NewService(s, nil, nil, nil, clock)
	kept.WithViews(NewViews(1 << 30))
	got := make([]sunsetv1.APIRequestCount, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			q := q
			if i%2 == 1 {
				q.Users = 1 // another rendering of the same view
			}
			var err error
			if got[i], err = kept.Get("endpoints.v1", q); err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	for i := 0; i < len(got); i += 2 {
		require.Equal(t, want, got[i])
	}
	require.Len(t, got[1].Status.Last24h[19].ByNode[0].ByUser, 1)
}

// Over HTTP, answers that views kept encoded are the bytes a handler
// without views writes: one object, lists with and without selectors,
// indented, and as Tables.
func TestViewsAnswerTheSameBytes(t *testing.T) {
	s, now, clock := viewsStore(t)
	plain, kept := http.NewServeMux(), http.NewServeMux()
	New(Options{Querier: s, Logger: zerolog.Nop(), Now: clock}).Register(plain)
	New(Options{Querier: s, Logger: zerolog.Nop(), Now: clock, Views: NewViews(1 << 30)}).Register(kept)
	var reqs []countkey.Request
	for i := range 300 {
		api := []string{"endpoints.v1", "cronjobs.v1beta1.batch", "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io"}[i%3]
		reqs = append(reqs, countkey.Request{ID: fmt.Sprint(i), RemovedRelease: map[bool]string{true: "1.25"}[i%3 == 1],
			Key: countkey.CountKey{Cluster: []string{"c1", "c2"}[i%2], API: api, Removed: i%3 == 1,
				Cell: countkey.Cell{Hour: now.Truncate(time.Hour).Add(-time.Duration(i%40) * time.Hour), Node: fmt.Sprintf("m%d", i%3),
					Username: fmt.Sprintf("system:serviceaccount:ns:app-%d", i%7), UserAgent: "app/1.0 <&>", Verb: "get"}}})
	}
	_, err := storetest.Apply(s, reqs)
	require.NoError(t, err)
	const base = "/apis/sunset.dev/v1/apirequestcounts"
	for _, target := range []string{
		base, base + "?since=48h", base + "?labelSelector=sunset.dev%2Fstate%3Dremoved", base + "?fieldSelector=metadata.name%3Dendpoints.v1",
		base + "?labelSelector=sunset.dev%2Fstate%3Dnone", base + "?user=system:serviceaccount:ns:app-3", base + "?pretty=true",
		base + "/endpoints.v1", base + "/endpoints.v1?since=720h&hourly=true&users=2", base + "/endpoints.v1?cluster=c2", base + "/endpoints.v1?pretty=1",
	} {
		for _, accept := range []string{"", "application/json;as=Table;v=v1;g=meta.k8s.io"} {
			// Twice: the second answer is the kept one.
			for range 2 {
				want, got := httptest.NewRecorder(), httptest.NewRecorder()
				for _, h := range []struct {
					mux *http.ServeMux
					rec *httptest.ResponseRecorder
				}{{plain, want}, {kept, got}} {
					r := httptest.NewRequest(http.MethodGet, target, nil)
					r.Header.Set("Accept", accept)
					h.mux.ServeHTTP(h.rec, r)
				}
				require.Equal(t, http.StatusOK, want.Code, "%s: %s", target, want.Body)
				require.Equal(t, want.Header(), got.Header(), target)
				require.Equal(t, want.Body.String(), got.Body.String(), "%s, Accept %q", target, accept)
			}
		}
	}
}

// Views moved on from hour to hour (roll.go) answer as reading everything:
// requests of the current hour, now and then one of the hour before, the
// clock moving 20 to 40 minutes a step, and a few query shapes asked at
// every step, so that each view is moved on many times.
func TestViewsMovedOnAnswerAsReadingEverything(t *testing.T) {
	s, now, clock := viewsStore(t)
	isSystem := func(u string) bool { return u == "user-0" }
	plain := NewService(s, nil, nil, isSystem, clock)
	kept := NewService(s, nil, nil, isSystem, clock)
	kept.WithViews(NewViews(1 << 30))
	rng := rand.New(rand.NewPCG(3, 14))
	id := 0
	var queries []sunsetv1.Query
	for _, since := range []int{0, 3, 30} {
		for _, hourly := range []bool{false, true} {
			q := sunsetv1.DefaultQuery()
			q.Users = 2
			if since > 0 {
				q.Since, q.Hourly = time.Duration(since)*time.Hour, hourly
			} else if hourly {
				q.User = "user-3"
			}
			queries = append(queries, q)
		}
	}
	for step := range 120 {
		var reqs []countkey.Request
		for range rng.IntN(30) {
			id++
			hour := now.Truncate(time.Hour)
			if rng.IntN(40) == 0 {
				hour = hour.Add(-time.Hour)
			}
			reqs = append(reqs, countkey.Request{ID: fmt.Sprint(id), Key: countkey.CountKey{Cluster: []string{"c1", "c2"}[rng.IntN(2)],
				API: []string{"endpoints.v1", "cronjobs.v1beta1.batch"}[rng.IntN(2)], Removed: rng.IntN(4) == 0,
				Cell: countkey.Cell{Hour: hour, Node: fmt.Sprintf("m%d", rng.IntN(2)+step/40), Username: fmt.Sprintf("user-%d", rng.IntN(6)),
					UserAgent: fmt.Sprintf("agent/%d", rng.IntN(3)), Verb: []string{"get", "list"}[rng.IntN(2)]}}})
		}
		_, err := storetest.Apply(s, reqs)
		require.NoError(t, err)
		for _, q := range queries {
			want, err := plain.List(q)
			require.NoError(t, err)
			got, err := kept.List(q)
			require.NoError(t, err)
			require.Equal(t, want, got, "step %d at %s: %+v", step, now.Format(time.RFC3339), q)
		}
		*now = now.Add(time.Duration(20+rng.IntN(21)) * time.Minute)
	}
}

// Views of queries that match nothing, of cluster names a reader makes
// up, count against the budget: they cannot grow without bound.
func TestViewsOfMadeUpClustersStayWithinTheBudget(t *testing.T) {
	s, _, clock := viewsStore(t)
	views := NewViews(64 << 10)
	svc := NewService(s, nil, nil, nil, clock)
	svc.WithViews(views)
	for i := range 1000 {
		q := sunsetv1.DefaultQuery()
		q.Cluster = fmt.Sprintf("made-up-%d", i)
		_, err := svc.Get("endpoints.v1", q)
		require.ErrorIs(t, err, sunsetv1.ErrNotFound)
	}
	// Each kept view: 4,096 bytes, its key's strings, and the JSON of an
	// empty answer (the same for all); 12 fit in 64 KiB.
	empty := views.lru.Front().Value.(*view).outputs[sunsetv1.DefaultUsersToReport].json
	require.Len(t, views.by, 12)
	require.Equal(t, int64(12*(4096+len("endpoints.v1")+len("made-up-999")+len(empty))), views.used)
}
