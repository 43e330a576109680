package api

import (
	"bytes"
	"container/list"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// Views keeps what recent queries read, as builders, so that the next
// query of the same API reads again only what the store's versions
// (store.Versions) say may have changed since: nothing of an API nobody
// called, the current hour of one that was called, and every hour again
// only after a late request or a deletion. A 30-day window of a busy API
// is hundreds of thousands of counts; its current hour is a 720th of them.
//
// What is kept is bounded by an estimate of its bytes; the least recently
// used views go first. In a new hour a view is moved on from the hour
// before (roll.go), since the day and the window both move. Views is safe
// for concurrent use; queries of one view wait for each other.
type Views struct {
	mu     sync.Mutex
	budget int64
	used   int64
	by     map[viewKey]*list.Element // of *view
	lru    *list.List                // most recently used first
}

// NewViews keeps views up to about budget bytes; 0 or less keeps none.
func NewViews(budget int64) *Views {
	return &Views{budget: budget, by: map[viewKey]*list.Element{}, lru: list.New()}
}

// WithViews keeps what queries read in v, for the next queries to read
// only what changed since.
func (s *Service) WithViews(v *Views) { s.views = v }

// viewKey is what a view is read for: one query's shape, in one hour.
type viewKey struct {
	fieldRule bool
	name      string
	cluster   string
	since     time.Duration
	hourly    bool
	now       time.Time // the current hour
}

// view is one query's builders, and the versions they hold.
type view struct {
	mu  sync.Mutex
	key viewKey
	// versions are those of the subjects read, by cluster.
	versions map[string]store.Versions
	// past holds every hour before the current one; full holds past and
	// the current hour. past's cells are full's: full is a clone.
	past, full *builder
	// outputs are full's renderings, by the users asked for.
	outputs map[int]*output
	bytes   int64 // under Views.mu
	// rollFrom, until the view is first built, is the same query's view
	// of the hour before, to be moved on to this one (roll.go).
	rollFrom *view
}

// collectFunc adds the counts of every subject of a query over [from, to]
// to b.
type collectFunc func(b *builder, from, to time.Time) error

// eachFunc calls fn for every count of every subject of a query over
// [from, to].
type eachFunc func(from, to time.Time, fn func(countkey.CountKey, uint64) error) error

// reader reads the counts of a query's subjects.
type reader struct {
	collect collectFunc
	each    eachFunc
}

// builder returns a builder of the query key over subs, and its view, to
// be rendered before release is called. Without views every call reads
// everything, and the view is nil.
func (v *Views) builder(key viewKey, subs []subject, fresh func() *builder, r reader) (b *builder, vw *view, release func(), err error) {
	if v == nil || v.budget <= 0 {
		b = fresh()
		from, to := b.scanRange()
		return b, nil, func() {}, r.collect(b, from, to)
	}
	vw = v.get(key)
	vw.mu.Lock()
	b, err = vw.build(subs, fresh, r)
	if err != nil {
		vw.past, vw.full, vw.versions, vw.outputs = nil, nil, nil, nil
		vw.mu.Unlock()
		v.drop(vw)
		return nil, nil, func() {}, err
	}
	v.account(vw)
	return b, vw, vw.mu.Unlock, nil
}

// output is one rendering of a view: the object, and its JSON as
// encoding/json writes it, without a newline. Neither changes once made;
// a view that changes makes new ones.
type output struct {
	obj  sunsetv1.APIRequestCount
	json []byte // nil when not kept in a view
}

// kept returns the view's output for users, if it has one; the caller
// holds vw.mu.
func (vw *view) kept(users int) *output {
	if vw == nil {
		return nil
	}
	return vw.outputs[users]
}

// keep encodes obj and keeps it as the view's output for users; the
// caller holds vw.mu. Without a view it only wraps obj.
func (v *Views) keep(vw *view, users int, obj sunsetv1.APIRequestCount) (*output, error) {
	out := &output{obj: obj}
	if vw == nil {
		return out, nil
	}
	if vw.key.fieldRule {
		// Field rules answer in a shape of their own (Service.Field).
		return out, nil
	}
	var err error
	if out.json, err = json.Marshal(obj); err != nil {
		return nil, err
	}
	if vw.outputs == nil {
		vw.outputs = map[int]*output{}
	}
	vw.outputs[users] = out
	v.account(vw)
	return out, nil
}

// build brings the view up to subs' versions; the caller holds vw.mu.
func (vw *view) build(subs []subject, fresh func() *builder, r reader) (*builder, error) {
	current := vw.key.now
	switch vw.holds(subs) {
	case holdsAll:
		vw.full.forgetShown()
		return vw.full, nil
	case holdsNone:
		vw.outputs = nil
		past, err := vw.rolled(subs, r)
		if err != nil {
			return nil, err
		}
		if past == nil {
			past = fresh()
			from, _ := past.scanRange()
			if err := r.collect(past, from, current.Add(-time.Hour)); err != nil {
				return nil, err
			}
		}
		vw.past = past
	}
	full := vw.past.clone()
	if err := r.collect(full, current, current); err != nil {
		return nil, err
	}
	vw.full, vw.outputs = full, nil
	vw.versions = make(map[string]store.Versions, len(subs))
	for _, sub := range subs {
		vw.versions[sub.cluster] = sub.versions
	}
	return full, nil
}

type holding int

const (
	holdsNone holding = iota
	holdsPast         // every hour before the current one
	holdsAll
)

// holds says which of the view's builders still hold for subs.
func (vw *view) holds(subs []subject) holding {
	if vw.full == nil || len(subs) != len(vw.versions) {
		return holdsNone
	}
	h := holdsAll
	for _, sub := range subs {
		kept, ok := vw.versions[sub.cluster]
		switch {
		case !ok || kept.Past != sub.versions.Past:
			return holdsNone
		case kept.Writes != sub.versions.Writes:
			h = holdsPast
		}
	}
	return h
}

// get returns the view of key, new or kept, as the most recently used.
func (v *Views) get(key viewKey) *view {
	v.mu.Lock()
	defer v.mu.Unlock()
	if el, ok := v.by[key]; ok {
		v.lru.MoveToFront(el)
		return el.Value.(*view)
	}
	vw := &view{key: key}
	before := key
	before.now = key.now.Add(-time.Hour)
	if el, ok := v.by[before]; ok {
		// Moved on when vw is first built.
		vw.rollFrom = el.Value.(*view)
		v.remove(el)
	}
	v.by[key] = v.lru.PushFront(vw)
	// Views of hours before the last are never read again; those of the
	// last wait for their query to be asked in this hour.
	for el := v.lru.Back(); el != nil; {
		prev := el.Prev()
		if old := el.Value.(*view); old.key.now.Before(before.now) {
			v.remove(el)
		}
		el = prev
	}
	return vw
}

// account records a view's size, and lets go of the least recently used
// views while the kept ones are over the budget. A view alone over the
// budget is not kept. The caller holds vw.mu.
func (v *Views) account(vw *view) {
	bytes := viewBytes + int64(len(vw.key.name)+len(vw.key.cluster)) + vw.full.footprint()
	if vw.past != nil {
		// The cells are shared; the rest is the past's own.
		bytes += int64(len(vw.past.clients))*clientBytes + int64(len(vw.past.window.users))*windowUserBytes
	}
	for _, out := range vw.outputs {
		bytes += int64(len(out.json))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	el, ok := v.by[vw.key]
	if !ok || el.Value.(*view) != vw {
		return
	}
	v.used += bytes - vw.bytes
	vw.bytes = bytes
	for v.used > v.budget && v.lru.Len() > 0 {
		v.remove(v.lru.Back())
	}
}

// drop lets go of vw, if kept.
func (v *Views) drop(vw *view) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if el, ok := v.by[vw.key]; ok && el.Value.(*view) == vw {
		v.remove(el)
	}
}

func (v *Views) remove(el *list.Element) {
	vw := el.Value.(*view)
	v.lru.Remove(el)
	delete(v.by, vw.key)
	v.used -= vw.bytes
}

// clone copies b for more counts to be added: everything that adding or
// rendering changes is copied, and the cells of the hours before the
// current one are shared, as nothing adds to them.
func (b *builder) clone() *builder {
	c := *b
	c.hours[b.now.Hour()] = hourAgg{}
	c.nodes = maps.Clone(b.nodes)
	c.clients = slices.Clone(b.clients)
	c.verbs = verbInterner{names: slices.Clone(b.verbs.names), ix: maps.Clone(b.verbs.ix)}
	c.window = b.window.clone()
	c.lastCell = cellCursor{}
	c.clientIx = clientIndex{ix: maps.Clone(b.clientIx.ix), last: -1}
	return &c
}

func (w windowAgg) clone() windowAgg {
	c := w
	if w.users != nil {
		c.users = make(map[string]*windowUser, len(w.users))
		for name, u := range w.users {
			cu := *u
			cu.agents = maps.Clone(u.agents)
			c.users[name] = &cu
		}
	}
	if w.hours != nil {
		c.hours = maps.Clone(w.hours)
		for h, n := range c.hours {
			cn := *n
			c.hours[h] = &cn
		}
	}
	return c
}

// forgetShown readies a builder rendered before for another rendering.
func (b *builder) forgetShown() {
	for i := range b.clients {
		b.clients[i].shown = false
	}
}

// Rough sizes of what a builder holds, for the budget of Views.
const (
	// viewBytes is what any view holds, whatever it read: its key and its
	// builders' fixed parts. Views of queries that match nothing (of any
	// cluster name a reader makes up) still count against the budget.
	viewBytes       = 4096
	rowBytes        = 40
	verbRowBytes    = 24
	cellBytes       = 160
	clientBytes     = 120 // the client, and its entry in the index
	windowUserBytes = 200 // the user, its map entry and its agents
)

// footprint estimates the bytes b holds.
func (b *builder) footprint() int64 {
	n := int64(len(b.clients))*clientBytes + int64(len(b.window.users))*windowUserBytes
	for i := range b.hours {
		for _, cl := range b.hours[i].nodes {
			n += cellBytes + int64(cap(cl.rows))*rowBytes + int64(cap(cl.verbs))*verbRowBytes
		}
	}
	return n
}

// listJSON is the compact JSON of an APIRequestCountList of outs, as
// encoding/json writes it, in pieces: the list's head, each item's JSON
// as views kept it, the commas between and the tail. Nil if an item has
// none. Written piece by piece, a list of tens of megabytes is never
// copied whole.
func listJSON(outs []*output) [][]byte {
	pieces := make([][]byte, 0, 2*len(outs)+1)
	pieces = append(pieces, listHead)
	for i, o := range outs {
		if o == nil || o.json == nil {
			return nil
		}
		if i > 0 {
			pieces = append(pieces, comma)
		}
		pieces = append(pieces, o.json)
	}
	return append(pieces, listTail)
}

var comma = []byte{','}

// listHead and listTail are the compact JSON of an APIRequestCountList
// around its items.
var listHead, listTail = func() ([]byte, []byte) {
	empty, err := json.Marshal(sunsetv1.APIRequestCountList{TypeMeta: typeMeta("APIRequestCountList"), Items: []sunsetv1.APIRequestCount{}})
	if err != nil {
		panic(err)
	}
	head, tail, ok := bytes.Cut(empty, []byte("[]"))
	if !ok {
		panic("api: an empty list encodes without []")
	}
	return append(slices.Clone(head), '['), append([]byte{']'}, tail...)
}()
