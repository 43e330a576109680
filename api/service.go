package api

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/store"
)

// Querier reads counts. *store.Store implements it. ScanCounts and
// ScanFieldRuleCounts may be called concurrently, over different hours.
// With views (WithViews), APIs and FieldRules must give each subject's
// versions (store.Versions): what a query read is kept, and read again
// only when they move.
type Querier interface {
	APIs() []store.APIInfo
	ScanCounts(cluster, api string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error
	// WorkloadsOf reads the workload records of the given clients of one
	// API; clients without one are left out.
	WorkloadsOf(cluster, api string, clients []store.ClientID) (map[store.ClientID]store.Workload, error)
	// FieldRules, ScanFieldRuleCounts and FieldRuleWorkloadsOf read the
	// counts of field rules as the others read those of APIs.
	FieldRules() []store.FieldRuleInfo
	ScanFieldRuleCounts(cluster, rule string, from, to time.Time, fn func(store.FieldRuleKey, uint64) error) error
	FieldRuleWorkloadsOf(cluster, rule string, clients []store.ClientID) (map[store.ClientID]store.Workload, error)
}

// Service builds APIRequestCount objects from counts. The HTTP handler
// serves it; `sunset report --data-dir` calls it directly.
type Service struct {
	q        Querier
	rules    *fieldrule.Set
	catalog  *catalog.Catalog
	isSystem func(string) bool
	now      func() time.Time
	// clusterScan, if set, joins upgrade checks (WithClusterScan).
	clusterScan ClusterScan
	// exemptions, if set, apply to upgrade checks (WithExemptions).
	exemptions Exemptions
	// overrides, if set, are shown in upgrade checks (WithGateOverrides).
	overrides GateOverrideReader
	// views, if set, keep what queries read for the next (WithViews).
	views *Views
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
func (s *Service) List(q sunsetv1.Query) (sunsetv1.APIRequestCountList, error) {
	outs, err := s.list(q)
	out := sunsetv1.APIRequestCountList{TypeMeta: typeMeta("APIRequestCountList"), Items: make([]sunsetv1.APIRequestCount, len(outs))}
	for i, o := range outs {
		out.Items[i] = o.obj
	}
	return out, err
}

// list is List as outputs.
func (s *Service) list(q sunsetv1.Query) ([]*output, error) {
	now := s.now()
	var out []*output
	infos := s.q.APIs()
	for start := 0; start < len(infos); {
		end := start + 1
		for end < len(infos) && infos[end].API == infos[start].API {
			end++
		}
		item, calledByUser, found, err := s.build(s.apiSource(infos[start].API), apiSubjects(infos[start:end]), q, now)
		if err != nil {
			return nil, err
		}
		if found && matches(q, item.obj, calledByUser) {
			out = append(out, item)
		}
		start = end
	}
	return out, nil
}

// Get returns one API, or ErrNotFound.
func (s *Service) Get(name string, q sunsetv1.Query) (sunsetv1.APIRequestCount, error) {
	out, err := s.get(name, q)
	if err != nil {
		return sunsetv1.APIRequestCount{}, err
	}
	return out.obj, nil
}

// get is Get as an output.
func (s *Service) get(name string, q sunsetv1.Query) (*output, error) {
	var infos []store.APIInfo
	for _, info := range s.q.APIs() {
		if info.API == name {
			infos = append(infos, info)
		}
	}
	out, _, found, err := s.build(s.apiSource(name), apiSubjects(infos), q, s.now())
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, sunsetv1.ErrNotFound
	}
	return out, nil
}

// source reads the counts and workload records of one API or field rule.
type source struct {
	name string
	// catalogued is true for an API: the lifecycle catalog describes it.
	catalogued  bool
	scan        func(cluster string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error
	workloadsOf func(cluster string, clients []store.ClientID) (map[store.ClientID]store.Workload, error)
}

func (s *Service) apiSource(api string) source {
	return source{name: api, catalogued: true,
		scan: func(cluster string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error {
			return s.q.ScanCounts(cluster, api, from, to, fn)
		},
		workloadsOf: func(cluster string, clients []store.ClientID) (map[store.ClientID]store.Workload, error) {
			return s.q.WorkloadsOf(cluster, api, clients)
		}}
}

func (s *Service) fieldRuleSource(rule string) source {
	return source{name: rule,
		scan: func(cluster string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error {
			return s.q.ScanFieldRuleCounts(cluster, rule, from, to, func(k store.FieldRuleKey, n uint64) error {
				return fn(countkey.CountKey{Cluster: k.Cluster, Cell: k.Cell}, n)
			})
		},
		workloadsOf: func(cluster string, clients []store.ClientID) (map[store.ClientID]store.Workload, error) {
			return s.q.FieldRuleWorkloadsOf(cluster, rule, clients)
		}}
}

// subject is what build needs of an API's or a field rule's metadata in
// one cluster.
type subject struct {
	cluster, removedRelease string
	nodes                   map[string]time.Time
	versions                store.Versions
}

func apiSubjects(infos []store.APIInfo) []subject {
	out := make([]subject, len(infos))
	for i, info := range infos {
		out[i] = subject{cluster: info.Cluster, removedRelease: info.RemovedRelease, nodes: info.Nodes, versions: info.Versions}
	}
	return out
}

// build renders one API or field rule from the clusters in subjects that
// match q, and says whether q.User called it (calledBy).
func (s *Service) build(src source, subjects []subject, q sunsetv1.Query, now time.Time) (out *output, calledByUser, found bool, err error) {
	name := src.name
	var matching []subject
	var removedIn catalog.Release
	for _, sub := range subjects {
		if q.Cluster != "" && sub.cluster != q.Cluster {
			continue
		}
		matching = append(matching, sub)
		// Clusters may announce different releases; the earliest matters.
		if r, err := catalog.ParseRelease(sub.removedRelease); err == nil && (removedIn.IsZero() || r.Less(removedIn)) {
			removedIn = r
		}
	}
	found = len(matching) > 0
	fresh := func() *builder {
		b := newBuilder(now, q.Since, s.isSystem)
		if q.Hourly {
			b.listHours()
		}
		return b
	}
	collect := func(b *builder, from, to time.Time) error {
		for _, sub := range matching {
			for node := range sub.nodes {
				b.nodes[nodeID{sub.cluster, node}] = true
			}
			scan := func(from, to time.Time, fn func(countkey.CountKey, uint64) error) error {
				return src.scan(sub.cluster, from, to, fn)
			}
			if err := s.scan(b, scan, from, to); err != nil {
				return err
			}
		}
		return nil
	}
	each := func(from, to time.Time, fn func(countkey.CountKey, uint64) error) error {
		for _, sub := range matching {
			if err := src.scan(sub.cluster, from, to, fn); err != nil {
				return err
			}
		}
		return nil
	}
	key := viewKey{fieldRule: !src.catalogued, name: name, cluster: q.Cluster, since: q.Since, hourly: q.Hourly, now: now.UTC().Truncate(time.Hour)}
	b, vw, release, err := s.views.builder(key, matching, fresh, reader{collect: collect, each: each})
	if err != nil {
		return nil, false, false, err
	}
	defer release()
	calledByUser = q.User != "" && b.calledBy(q.User)
	users := q.Users
	if users == 0 {
		users = sunsetv1.DefaultUsersToReport
	}
	if out := vw.kept(users); out != nil {
		return out, calledByUser, found, nil
	}
	st := b.status(removedIn.String(), users)
	// Workload records are read for the clients shown only, once each.
	records := map[string]map[store.ClientID]store.Workload{}
	for cluster, clients := range b.shownClients() {
		w, err := src.workloadsOf(cluster, clients)
		if err != nil {
			return nil, false, false, err
		}
		records[cluster] = w
	}
	st.Workloads = b.workloads(records)
	// Only APIs are in the catalog.
	if src.catalogued {
		if entry, ok := s.lookup(name); ok {
			if st.RemovedInRelease == "" {
				st.RemovedInRelease = entry.RemovedIn
			}
			st.DeprecatedInRelease = entry.DeprecatedIn
			st.Warning = entry.Warning()
			if r := entry.Replacement; r != nil {
				st.Replacement = &sunsetv1.Replacement{Group: r.Group, Version: r.Version, Kind: r.Kind, Resource: r.Resource}
			}
		}
	}
	obj := sunsetv1.APIRequestCount{
		TypeMeta: typeMeta("APIRequestCount"),
		Metadata: metav1.ObjectMeta{Name: name, Labels: labelsFor(st)},
		Spec:     sunsetv1.APIRequestCountSpec{NumberOfUsersToReport: int64(users)},
		Status:   st,
	}
	out, err = s.views.keep(vw, users, obj)
	return out, calledByUser, found, err
}

// lookup finds the catalog entry of an API name, resource.version.group.
func (s *Service) lookup(name string) (catalog.Entry, bool) {
	group, version, resource := countkey.SplitAPIName(name)
	return s.catalog.Lookup(group, version, resource)
}

// Fields lists every field rule in force with its counts, sorted by name.
func (s *Service) Fields(q sunsetv1.Query) (sunsetv1.FieldRequestCountList, error) {
	out := sunsetv1.FieldRequestCountList{TypeMeta: typeMeta("FieldRequestCountList"), Items: []sunsetv1.FieldRequestCount{}}
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
func (s *Service) Field(name string, q sunsetv1.Query) (sunsetv1.FieldRequestCount, error) {
	rule, ok := s.rules.Rule(name)
	if !ok {
		return sunsetv1.FieldRequestCount{}, sunsetv1.ErrNotFound
	}
	var subjects []subject
	for _, info := range s.q.FieldRules() {
		if info.Rule == name {
			subjects = append(subjects, subject{cluster: info.Cluster, removedRelease: info.RemovedRelease, nodes: info.Nodes, versions: info.Versions})
		}
	}
	out, _, _, err := s.build(s.fieldRuleSource(name), subjects, q, s.now())
	if err != nil {
		return sunsetv1.FieldRequestCount{}, err
	}
	obj := out.obj
	st := obj.Status
	st.RemovedInRelease, st.DeprecatedInRelease, st.Warning = rule.RemovedIn, rule.DeprecatedIn, rule.Message
	return sunsetv1.FieldRequestCount{TypeMeta: typeMeta("FieldRequestCount"), Metadata: metav1.ObjectMeta{Name: name, Labels: labelsFor(st)},
		Spec: sunsetv1.FieldRequestCountSpec{NumberOfUsersToReport: obj.Spec.NumberOfUsersToReport, Rule: rule}, Status: st}, nil
}

// counted is one count read by a scan.
type counted struct {
	k countkey.CountKey
	n uint64
}

// Bounds of a parallel scan: the parts it reads at once, and the counts
// one part hands over at a time.
const (
	maxScanParts = 4
	scanBatch    = 512
)

// scan adds the counts that scanCounts reads, those of one API or field
// rule in one cluster, over the hours [from, to] to b. Reading badger
// costs several times what adding costs, so with more than one core the
// hours are read in parts at once, and this goroutine adds what they hand
// over, in whatever order it comes.
func (s *Service) scan(b *builder, scanCounts func(from, to time.Time, fn func(countkey.CountKey, uint64) error) error, from, to time.Time) error {
	hours := int(to.Sub(from)/time.Hour) + 1
	parts := min(runtime.GOMAXPROCS(0), maxScanParts, hours)
	if parts <= 1 {
		return scanCounts(from, to, b.add)
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
			errs[p] = scanCounts(from, to, func(k countkey.CountKey, n uint64) error {
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
