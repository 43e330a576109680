package api

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/store"
)

// ErrNotFound is returned by Service.Get for an API without counts.
var ErrNotFound = errors.New("api: not found")

// Querier reads counts. *store.Store implements it. ScanCounts may be
// called concurrently, over different hours.
type Querier interface {
	APIs() []store.APIInfo
	ScanCounts(cluster, api string, from, to time.Time, fn func(store.CountKey, uint64) error) error
	// WorkloadsOf reads the workload records of the given clients of one
	// API; clients without one are left out.
	WorkloadsOf(cluster, api string, clients []store.ClientID) (map[store.ClientID]store.Workload, error)
}

// Service builds APIRequestCount objects from counts. The HTTP handler
// serves it; `sunset report --data-dir` calls it directly.
type Service struct {
	q        Querier
	rules    *fieldrule.Set
	catalog  *catalog.Catalog
	isSystem func(string) bool
	now      func() time.Time
}

// NewService builds a Service; nil catalog, isSystem and now get defaults
// (built-in catalog, no system users, time.Now).
func NewService(q Querier, cat *catalog.Catalog, rules *fieldrule.Set, isSystem func(string) bool, now func() time.Time) *Service {
	if rules == nil {
		rules, _ = fieldrule.New(nil)
	}
	if cat == nil {
		cat, _ = catalog.New(nil)
	}
	if isSystem == nil {
		isSystem = func(string) bool { return false }
	}
	if now == nil {
		now = time.Now
	}
	return &Service{q: q, rules: rules, catalog: cat, isSystem: isSystem, now: now}
}

// List returns every API with counts in retention that matches q, sorted by
// name.
func (s *Service) List(q Query) (APIRequestCountList, error) {
	now := s.now()
	out := APIRequestCountList{TypeMeta: typeMeta("APIRequestCountList"), Items: []APIRequestCount{}}
	infos := slices.DeleteFunc(s.q.APIs(), func(i store.APIInfo) bool { return strings.HasPrefix(i.API, aggregate.FieldRulePrefix) })
	for start := 0; start < len(infos); {
		end := start + 1
		for end < len(infos) && infos[end].API == infos[start].API {
			end++
		}
		obj, b, found, err := s.build(infos[start].API, infos[start:end], q, now)
		if err != nil {
			return out, err
		}
		if found && q.matches(obj, b.calledBy) {
			out.Items = append(out.Items, obj)
		}
		start = end
	}
	return out, nil
}

// Get returns one API, or ErrNotFound.
func (s *Service) Get(name string, q Query) (APIRequestCount, error) {
	if strings.HasPrefix(name, aggregate.FieldRulePrefix) {
		return APIRequestCount{}, ErrNotFound
	}
	var infos []store.APIInfo
	for _, info := range s.q.APIs() {
		if info.API == name {
			infos = append(infos, info)
		}
	}
	obj, _, found, err := s.build(name, infos, q, s.now())
	if err != nil {
		return obj, err
	}
	if !found {
		return obj, ErrNotFound
	}
	return obj, nil
}

// build renders one API from the clusters in infos that match q.
func (s *Service) build(name string, infos []store.APIInfo, q Query, now time.Time) (APIRequestCount, *builder, bool, error) {
	b := newBuilder(now, q.Since, s.isSystem)
	if q.Hourly {
		b.listHours()
	}
	from, to := b.scanRange()
	var removedIn catalog.Release
	found := false
	for _, info := range infos {
		if q.Cluster != "" && info.Cluster != q.Cluster {
			continue
		}
		found = true
		// Clusters may announce different releases; the earliest matters.
		if r, err := catalog.ParseRelease(info.RemovedRelease); err == nil && (removedIn.IsZero() || r.Less(removedIn)) {
			removedIn = r
		}
		for node := range info.Nodes {
			b.nodes[nodeID{info.Cluster, node}] = true
		}
		if err := s.scan(b, info.Cluster, info.API, from, to); err != nil {
			return APIRequestCount{}, nil, false, err
		}
	}
	users := q.Users
	if users == 0 {
		users = DefaultUsersToReport
	}
	st := b.status(removedIn.String(), users)
	// Workload records are read for the clients shown only, once each.
	records := map[string]map[store.ClientID]store.Workload{}
	for cluster, clients := range b.shownClients() {
		w, err := s.q.WorkloadsOf(cluster, name, clients)
		if err != nil {
			return APIRequestCount{}, nil, false, err
		}
		records[cluster] = w
	}
	st.Workloads = b.workloads(records)
	if entry, ok := s.lookup(name); ok {
		if st.RemovedInRelease == "" {
			st.RemovedInRelease = entry.RemovedIn
		}
		st.DeprecatedInRelease = entry.DeprecatedIn
		st.Warning = entry.Warning()
		if r := entry.Replacement; r != nil {
			st.Replacement = &Replacement{Group: r.Group, Version: r.Version, Kind: r.Kind, Resource: r.Resource}
		}
	}
	obj := APIRequestCount{
		TypeMeta: typeMeta("APIRequestCount"),
		Metadata: metav1.ObjectMeta{Name: name, Labels: labelsFor(st)},
		Spec:     APIRequestCountSpec{NumberOfUsersToReport: int64(users)},
		Status:   st,
	}
	return obj, b, found, nil
}

// lookup finds the catalog entry of an API name, resource.version.group.
func (s *Service) lookup(name string) (catalog.Entry, bool) {
	group, version, resource := aggregate.SplitAPIName(name)
	return s.catalog.Lookup(group, version, resource)
}

// Fields lists every field rule in force with its counts, sorted by name.
func (s *Service) Fields(q Query) (FieldRequestCountList, error) {
	out := FieldRequestCountList{TypeMeta: typeMeta("FieldRequestCountList"), Items: []FieldRequestCount{}}
	rules := s.rules.Rules()
	slices.SortFunc(rules, func(a, b fieldrule.Rule) int { return strings.Compare(a.Name, b.Name) })
	for _, r := range rules {
		obj, err := s.Field(r.Name, q)
		if err != nil {
			return out, err
		}
		out.Items = append(out.Items, obj)
	}
	return out, nil
}

// Field returns one field rule's counts, or ErrNotFound for an unknown rule.
func (s *Service) Field(name string, q Query) (FieldRequestCount, error) {
	rule, ok := s.rules.Rule(name)
	if !ok {
		return FieldRequestCount{}, ErrNotFound
	}
	var infos []store.APIInfo
	for _, info := range s.q.APIs() {
		if info.API == aggregate.FieldRulePrefix+name {
			infos = append(infos, info)
		}
	}
	obj, _, _, err := s.build(aggregate.FieldRulePrefix+name, infos, q, s.now())
	if err != nil {
		return FieldRequestCount{}, err
	}
	st := obj.Status
	st.RemovedInRelease, st.DeprecatedInRelease, st.Warning = rule.RemovedIn, rule.DeprecatedIn, rule.Message
	return FieldRequestCount{TypeMeta: typeMeta("FieldRequestCount"), Metadata: metav1.ObjectMeta{Name: name, Labels: labelsFor(st)},
		Spec: FieldRequestCountSpec{NumberOfUsersToReport: obj.Spec.NumberOfUsersToReport, Rule: rule}, Status: st}, nil
}

// counted is one count read by a scan.
type counted struct {
	k store.CountKey
	n uint64
}

// Bounds of a parallel scan: the parts it reads at once, and the counts
// one part hands over at a time.
const (
	maxScanParts = 4
	scanBatch    = 512
)

// scan adds the counts of one API in one cluster over the hours [from,
// to] to b. Reading badger costs several times what adding costs, so
// with more than one core the hours are read in parts at once, and this
// goroutine adds what they hand over, in whatever order it comes.
func (s *Service) scan(b *builder, cluster, api string, from, to time.Time) error {
	hours := int(to.Sub(from)/time.Hour) + 1
	parts := min(runtime.GOMAXPROCS(0), maxScanParts, hours)
	if parts <= 1 {
		return s.q.ScanCounts(cluster, api, from, to, b.add)
	}
	batches := make(chan []counted, 2*parts)
	free := make(chan []counted, 3*parts)
	newBatch := func() []counted {
		select {
		case batch := <-free:
			return batch[:0]
		default:
			return make([]counted, 0, scanBatch)
		}
	}
	errs := make([]error, parts)
	var wg sync.WaitGroup
	start := from
	for p := range parts {
		end := start.Add(time.Duration(hours/parts-1) * time.Hour)
		if p == parts-1 {
			end = to
		}
		from, to := start, end
		wg.Go(func() {
			batch := newBatch()
			errs[p] = s.q.ScanCounts(cluster, api, from, to, func(k store.CountKey, n uint64) error {
				batch = append(batch, counted{k, n})
				if len(batch) == scanBatch {
					batches <- batch
					batch = newBatch()
				}
				return nil
			})
			if len(batch) > 0 {
				batches <- batch
			}
		})
		start = end.Add(time.Hour)
	}
	go func() {
		wg.Wait()
		close(batches)
	}()
	var addErr error
	for batch := range batches {
		for _, c := range batch {
			if addErr == nil {
				addErr = b.add(c.k, c.n)
			}
		}
		select {
		case free <- batch:
		default:
		}
	}
	return errors.Join(append(errs, addErr)...)
}
