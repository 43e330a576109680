package api

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/workload"
)

// hoursPerDay is the length of last24h.
const hoursPerDay = 24

// MaxNodesPerHour is OpenShift's schema limit on byNode.
const MaxNodesPerHour = 512

type nodeID struct{ cluster, node string }

// clientID is a client of one cluster: the workload records are per
// cluster.
type clientID struct{ cluster, username, userAgent string }

// client is one client met in the day, once per query.
type client struct {
	id     clientID
	system bool
	// shown marks a client listed in some byUser.
	shown bool
}

type hourAgg struct {
	total, dry int64
	removed    int64
	system     int64
	nodes      map[nodeID]*cell
}

// cell holds one hour of one apiserver. Its users are kept as rows in
// the order the scan meets them, not in a map: the store returns a cell's
// keys together, sorted by client, so consecutive keys nearly always go
// to the last row, and nothing per user is allocated beyond the row.
type cell struct {
	total, dry int64
	system     int64
	rows       []userRow
	verbs      []verbRow
	// guide is the rows of the cell filled before this one, and guidePos
	// the row of it that the next new client most likely matches: cells
	// of one API list mostly the same clients in the same order, so the
	// client of a new row is found by one comparison, not a map lookup.
	guide    []userRow
	guidePos int
}

// userRow counts one client in a cell. Its verbs are verbs[first:first+n]
// of the cell: a row gets verbs only while it is the cell's last. A client
// met again after others (possible with another subresource, or with a
// Querier that does not sort) gets a new row; rendering merges them.
type userRow struct {
	client              int32
	first, n            int32
	total, dry, removed int64
}

type verbRow struct {
	verb       uint16
	count, dry int64
}

// windowUser accumulates one username over the window.
type windowUser struct {
	total, removed int64
	agents         map[string]int64
}

// builder accumulates counts of one API into the 24 hourly buckets of an
// APIRequestCount status, and into the optional window.
//
// Only counts are kept while scanning. The top users of each hour and
// apiserver are chosen from those counts, and only they become byUser
// entries; what runs behind a client is looked up and described once per
// client shown, in status.workloads (see workloads).
type builder struct {
	now      time.Time // truncated to the hour
	isSystem func(username string) bool
	hours    [hoursPerDay]hourAgg
	// nodes are the apiservers with requests to the API within the
	// retention period (from the store's metadata, and any the scan
	// meets): each is listed in every hour, with 0 when idle.
	nodes map[nodeID]bool

	clients  []client
	clientIx map[clientID]int32
	// last is the client of the previous key, and lastCell its cell.
	last     int32
	lastCell *cell
	lastHour int
	lastNode nodeID
	// verbNames are the verbs met, by index; cardinality.Verb keeps them
	// to the Kubernetes request verbs and "other".
	verbNames  []string
	verbIx     map[string]uint16
	lastVerb   string
	lastVerbIx uint16
	rawVerbs   []string
	rawVerbIx  []uint16

	since       time.Duration
	windowFrom  time.Time // zero without a window
	windowTotal int64
	windowRem   int64
	windowSys   int64
	windowUsers map[string]*windowUser
	// windowHours is nil unless the window's hours are wanted (?hourly).
	windowHours map[time.Time]*HourCount
}

func newBuilder(now time.Time, since time.Duration, isSystem func(string) bool) *builder {
	b := &builder{now: now.UTC().Truncate(time.Hour), isSystem: isSystem, since: since, nodes: map[nodeID]bool{},
		clientIx: map[clientID]int32{}, last: -1, lastHour: -1, verbIx: map[string]uint16{}}
	if since > 0 {
		b.windowFrom = now.UTC().Add(-since).Truncate(time.Hour)
		b.windowUsers = map[string]*windowUser{}
	}
	return b
}

// day is the range of hours last24h covers.
func (b *builder) day() (from, to time.Time) {
	return b.now.Add(-(hoursPerDay - 1) * time.Hour), b.now
}

// scanRange covers both the day and the window.
func (b *builder) scanRange() (from, to time.Time) {
	from, to = b.day()
	if !b.windowFrom.IsZero() && b.windowFrom.Before(from) {
		from = b.windowFrom
	}
	return from, to
}

// calledBy reports whether username made requests in the window, or in
// the last 24 hours without one.
func (b *builder) calledBy(username string) bool {
	if !b.windowFrom.IsZero() {
		return b.windowUsers[username] != nil
	}
	for _, c := range b.clients {
		if c.id.username == username {
			return true
		}
	}
	return false
}

func (b *builder) add(k store.CountKey, n uint64) error {
	c := int64(n)
	if !b.windowFrom.IsZero() && !k.Hour.Before(b.windowFrom) {
		b.addWindow(k, c)
	}
	from, to := b.day()
	if k.Hour.Before(from) || k.Hour.After(to) {
		return nil
	}
	hi := k.Hour.Hour()
	h := &b.hours[hi]
	cl := b.lastCell
	if nid := (nodeID{k.Cluster, k.Node}); cl == nil || hi != b.lastHour || nid != b.lastNode {
		if h.nodes == nil {
			h.nodes = map[nodeID]*cell{}
		}
		if cl = h.nodes[nid]; cl == nil {
			cl = &cell{}
			if last := b.lastCell; last != nil {
				// Sized like the last cell, so that rows are not copied
				// while the cell grows.
				cl.rows = make([]userRow, 0, len(last.rows)+len(last.rows)/8)
				cl.verbs = make([]verbRow, 0, len(last.verbs)+len(last.verbs)/8)
				cl.guide = last.rows
			}
			h.nodes[nid] = cl
			b.nodes[nid] = true
		}
		b.lastCell, b.lastHour, b.lastNode = cl, hi, nid
	}
	ci := b.client(k, cl)
	// Verbs are stored bounded already; older data may hold others.
	verb := b.verb(k.Verb)
	var row *userRow
	if len(cl.rows) > 0 && cl.rows[len(cl.rows)-1].client == ci {
		row = &cl.rows[len(cl.rows)-1]
	} else {
		cl.rows = append(cl.rows, userRow{client: ci, first: int32(len(cl.verbs))})
		row = &cl.rows[len(cl.rows)-1]
	}
	var v *verbRow
	if row.n > 0 && cl.verbs[len(cl.verbs)-1].verb == verb {
		v = &cl.verbs[len(cl.verbs)-1]
	} else {
		cl.verbs = append(cl.verbs, verbRow{verb: verb})
		row.n++
		v = &cl.verbs[len(cl.verbs)-1]
	}
	h.total += c
	cl.total += c
	row.total += c
	v.count += c
	if k.DryRun {
		v.dry += c
		h.dry += c
		cl.dry += c
		row.dry += c
	}
	if k.Removed {
		h.removed += c
		row.removed += c
	}
	if b.clients[ci].system {
		h.system += c
		cl.system += c
	}
	return nil
}

// client returns the index of k's client, adding it when new; cl is the
// cell k counts in.
func (b *builder) client(k store.CountKey, cl *cell) int32 {
	id := clientID{k.Cluster, k.Username, k.UserAgent}
	if b.last >= 0 && b.clients[b.last].id == id {
		return b.last
	}
	if g := cl.guidePos; g < len(cl.guide) {
		if ci := cl.guide[g].client; b.clients[ci].id == id {
			cl.guidePos++
			b.last = ci
			return ci
		}
	}
	ci, ok := b.clientIx[id]
	if !ok {
		ci = int32(len(b.clients))
		b.clients = append(b.clients, client{id: id, system: b.isSystem(k.Username)})
		b.clientIx[id] = ci
	}
	// Back in step with the guide when this cell lacks one of its clients.
	if g := cl.guidePos; g+1 < len(cl.guide) && cl.guide[g+1].client == ci {
		cl.guidePos += 2
	}
	b.last = ci
	return ci
}

// verb returns the index of a verb, bounded as cardinality.Verb does.
func (b *builder) verb(raw string) uint16 {
	if raw == b.lastVerb && len(b.verbNames) > 0 {
		return b.lastVerbIx
	}
	// The few verbs seen raw are compared before any map: the store's
	// strings are shared, so equal ones are found at once.
	for i, r := range b.rawVerbs {
		if r == raw {
			b.lastVerb, b.lastVerbIx = raw, b.rawVerbIx[i]
			return b.lastVerbIx
		}
	}
	name := cardinality.Verb(raw)
	vi, ok := b.verbIx[name]
	if !ok {
		vi = uint16(len(b.verbNames))
		b.verbNames = append(b.verbNames, name)
		b.verbIx[name] = vi
	}
	if len(b.rawVerbs) < maxRawVerbs {
		b.rawVerbs = append(b.rawVerbs, raw)
		b.rawVerbIx = append(b.rawVerbIx, vi)
	}
	b.lastVerb, b.lastVerbIx = raw, vi
	return vi
}

// maxRawVerbs bounds the raw verbs compared before the map: data written
// before verbs were bounded may hold any number.
const maxRawVerbs = 16

func (b *builder) addWindow(k store.CountKey, c int64) {
	b.windowTotal += c
	wu := b.windowUsers[k.Username]
	if wu == nil {
		wu = &windowUser{agents: map[string]int64{}}
		b.windowUsers[k.Username] = wu
	}
	wu.total += c
	wu.agents[k.UserAgent] += c
	system := b.isSystem(k.Username)
	if k.Removed {
		b.windowRem += c
		wu.removed += c
	}
	if system {
		b.windowSys += c
	}
	if b.windowHours != nil {
		h := b.windowHours[k.Hour]
		if h == nil {
			h = &HourCount{Hour: k.Hour.UTC()}
			b.windowHours[k.Hour] = h
		}
		h.RequestCount += c
		if k.Removed {
			h.RemovedRequestCount += c
		}
		if system {
			h.SystemRequestCount += c
		}
		if k.DryRun {
			h.DryRunCount += c
		}
	}
}

// listHours asks for the window's hours (?hourly) in status.window.byHour.
func (b *builder) listHours() {
	if !b.windowFrom.IsZero() {
		b.windowHours = map[time.Time]*HourCount{}
	}
}

// maxWindowAgents bounds the user agents listed per window user.
const maxWindowAgents = 3

func (b *builder) renderWindow(users int) *Window {
	w := &Window{Since: b.since.String(), From: b.windowFrom, RequestCount: b.windowTotal,
		RemovedRequestCount: b.windowRem, SystemRequestCount: b.windowSys, ByUser: []WindowUser{}}
	for name, wu := range b.windowUsers {
		u := WindowUser{UserName: name, RequestCount: wu.total, RemovedRequestCount: wu.removed, System: b.isSystem(name)}
		if u.System {
			w.SystemClientCount++
		}
		agents := make([]string, 0, len(wu.agents))
		for a := range wu.agents {
			agents = append(agents, a)
		}
		slices.SortFunc(agents, func(x, y string) int { return cmp.Or(cmp.Compare(wu.agents[y], wu.agents[x]), cmp.Compare(x, y)) })
		if len(agents) > maxWindowAgents {
			agents = agents[:maxWindowAgents]
		}
		u.UserAgents = agents
		w.ByUser = append(w.ByUser, u)
	}
	w.ClientCount = len(w.ByUser)
	slices.SortFunc(w.ByUser, func(x, y WindowUser) int {
		return cmp.Or(cmp.Compare(y.RequestCount, x.RequestCount), cmp.Compare(x.UserName, y.UserName))
	})
	if len(w.ByUser) > users {
		w.ByUser = w.ByUser[:users]
	}
	for _, h := range b.windowHours {
		w.ByHour = append(w.ByHour, *h)
	}
	slices.SortFunc(w.ByHour, func(x, y HourCount) int { return x.Hour.Compare(y.Hour) })
	return w
}

func (b *builder) status(removedIn string, users int) APIRequestCountStatus {
	st := APIRequestCountStatus{RemovedInRelease: removedIn, Last24h: make([]PerResourceAPIRequestLog, hoursPerDay)}
	r := b.newRenderer(users)
	for i := range b.hours {
		st.Last24h[i] = r.hour(&b.hours[i])
		st.RequestCount += st.Last24h[i].RequestCount
		st.RemovedRequestCount += b.hours[i].removed
		st.SystemRequestCount += b.hours[i].system
		st.DryRunCount += b.hours[i].dry
	}
	st.Removed = st.RemovedRequestCount > 0
	st.CurrentHour = st.Last24h[b.now.Hour()]
	if !b.windowFrom.IsZero() {
		st.Window = b.renderWindow(users)
	}
	return st
}

// renderer turns cells into byNode lists, with scratch space reused from
// cell to cell.
type renderer struct {
	b     *builder
	users int
	// nodes are b.nodes in the order byNode lists them, unless there are
	// more than MaxNodesPerHour (tooManyNodes): then each hour picks its
	// busiest.
	nodes        []nodeID
	tooManyNodes bool
	// head maps a client to its first row in the cell being rendered:
	// valid where seen equals gen.
	head []int32
	seen []uint32
	gen  uint32
	// heads are the first rows of the cell's clients; next chains the
	// further rows of a client, -1 ending the chain.
	heads []int32
	next  []int32
	top   []int32
	verbs [][2]int64
	// verbOrder lists verb indexes by name.
	verbOrder []uint16
}

func byName(x, y nodeID) int {
	return cmp.Or(cmp.Compare(x.cluster, y.cluster), cmp.Compare(x.node, y.node))
}

func (b *builder) newRenderer(users int) *renderer {
	r := &renderer{b: b, users: users, head: make([]int32, len(b.clients)), seen: make([]uint32, len(b.clients)),
		verbs: make([][2]int64, len(b.verbNames))}
	r.tooManyNodes = len(b.nodes) > MaxNodesPerHour
	if !r.tooManyNodes {
		r.nodes = slices.SortedFunc(maps.Keys(b.nodes), byName)
	}
	for i := range b.verbNames {
		r.verbOrder = append(r.verbOrder, uint16(i))
	}
	slices.SortFunc(r.verbOrder, func(x, y uint16) int { return cmp.Compare(b.verbNames[x], b.verbNames[y]) })
	return r
}

func (r *renderer) hour(h *hourAgg) PerResourceAPIRequestLog {
	out := PerResourceAPIRequestLog{RequestCount: h.total, SystemRequestCount: h.system, DryRunCount: h.dry}
	nids := r.nodes
	if r.tooManyNodes {
		// The busiest apiservers are kept when there are more than the
		// schema allows; idle ones (no cell) count 0.
		nids = slices.Collect(maps.Keys(r.b.nodes))
		total := func(nid nodeID) int64 {
			if cl := h.nodes[nid]; cl != nil {
				return cl.total
			}
			return 0
		}
		slices.SortFunc(nids, func(x, y nodeID) int { return cmp.Or(cmp.Compare(total(y), total(x)), byName(x, y)) })
		out.ByNodeOmitted = len(nids) - MaxNodesPerHour
		nids = nids[:MaxNodesPerHour]
		slices.SortFunc(nids, byName)
	}
	out.ByNode = make([]PerNodeAPIRequestLog, 0, len(nids))
	for _, nid := range nids {
		node := PerNodeAPIRequestLog{NodeName: nid.node, Cluster: nid.cluster, ByUser: []PerUserAPIRequestCount{}}
		if cl := h.nodes[nid]; cl != nil {
			node.RequestCount, node.DryRunCount, node.SystemRequestCount = cl.total, cl.dry, cl.system
			node.ByUser, node.ByUserOmitted = r.topUsers(cl)
		}
		out.ByNode = append(out.ByNode, node)
	}
	return out
}

// rowBefore orders a cell's clients as byUser lists them: most requests
// first, ties by username and user agent.
func (r *renderer) rowBefore(cl *cell, x, y int32) bool {
	rx, ry := &cl.rows[x], &cl.rows[y]
	if rx.total != ry.total {
		return rx.total > ry.total
	}
	cx, cy := &r.b.clients[rx.client].id, &r.b.clients[ry.client].id
	return cmp.Or(cmp.Compare(cx.username, cy.username), cmp.Compare(cx.userAgent, cy.userAgent)) < 0
}

// topUsers renders a cell's top clients. Each client's rows are merged
// first (totals into its first row), then the top users are chosen by
// count with a bounded heap, and only they become entries.
func (r *renderer) topUsers(cl *cell) ([]PerUserAPIRequestCount, int) {
	r.gen++
	r.heads = r.heads[:0]
	r.next = slices.Grow(r.next[:0], len(cl.rows))[:len(cl.rows)]
	for i := range cl.rows {
		row := &cl.rows[i]
		r.next[i] = -1
		if r.seen[row.client] == r.gen {
			// Another row of a client met before: fold it into the first.
			h := r.head[row.client]
			first := &cl.rows[h]
			first.total += row.total
			first.dry += row.dry
			first.removed += row.removed
			row.total, row.dry, row.removed = 0, 0, 0
			r.next[i], r.next[h] = r.next[h], int32(i)
			continue
		}
		r.seen[row.client], r.head[row.client] = r.gen, int32(i)
		r.heads = append(r.heads, int32(i))
	}
	top := r.heads
	switch {
	case r.users <= 0:
		top = nil
	case len(top) > r.users:
		top = r.topRows(cl)
	}
	slices.SortFunc(top, func(x, y int32) int {
		if r.rowBefore(cl, x, y) {
			return -1
		}
		return 1
	})
	out := make([]PerUserAPIRequestCount, 0, len(top))
	for _, i := range top {
		out = append(out, r.entry(cl, i))
	}
	return out, len(r.heads) - len(top)
}

// topRows picks the r.users best of r.heads: a heap whose root is the
// worst kept, so that most rows cost one comparison.
func (r *renderer) topRows(cl *cell) []int32 {
	heap := append(r.top[:0], r.heads[:r.users]...)
	worse := func(i, j int) bool { return r.rowBefore(cl, heap[j], heap[i]) }
	down := func(i int) {
		for {
			w := i
			if l := 2*i + 1; l < len(heap) && worse(l, w) {
				w = l
			}
			if rt := 2*i + 2; rt < len(heap) && worse(rt, w) {
				w = rt
			}
			if w == i {
				return
			}
			heap[i], heap[w] = heap[w], heap[i]
			i = w
		}
	}
	for i := len(heap)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, row := range r.heads[r.users:] {
		if r.rowBefore(cl, row, heap[0]) {
			heap[0] = row
			down(0)
		}
	}
	r.top = heap
	return heap
}

// entry is the byUser entry of the client whose first row is i.
func (r *renderer) entry(cl *cell, i int32) PerUserAPIRequestCount {
	row := &cl.rows[i]
	c := &r.b.clients[row.client]
	c.shown = true
	clear(r.verbs)
	nverbs := 0
	for j := i; j >= 0; j = r.next[j] {
		rj := &cl.rows[j]
		for _, v := range cl.verbs[rj.first : rj.first+rj.n] {
			if r.verbs[v.verb][0] == 0 && r.verbs[v.verb][1] == 0 {
				nverbs++
			}
			r.verbs[v.verb][0] += v.count
			r.verbs[v.verb][1] += v.dry
		}
	}
	u := PerUserAPIRequestCount{UserName: c.id.username, UserAgent: c.id.userAgent, RequestCount: row.total,
		System: c.system, RemovedRequestCount: row.removed, DryRunCount: row.dry,
		ByVerb: make([]PerVerbAPIRequestCount, 0, nverbs)}
	for _, vi := range r.verbOrder {
		if v := r.verbs[vi]; v != [2]int64{} {
			u.ByVerb = append(u.ByVerb, PerVerbAPIRequestCount{Verb: r.b.verbNames[vi], RequestCount: v[0], DryRunCount: v[1]})
		}
	}
	return u
}

// shownClients are the clients listed in some byUser of the last status,
// by cluster, for their workload records to be read.
func (b *builder) shownClients() map[string][]store.ClientID {
	out := map[string][]store.ClientID{}
	for _, c := range b.clients {
		if c.shown {
			out[c.id.cluster] = append(out[c.id.cluster], store.ClientID{Username: c.id.username, UserAgent: c.id.userAgent})
		}
	}
	return out
}

// workloads describes, once per client listed in byUser, what runs behind
// it, from the records read for each cluster; clients with nothing known
// are left out. The list is sorted by cluster, username and user agent.
func (b *builder) workloads(records map[string]map[store.ClientID]store.Workload) []ClientWorkload {
	var out []ClientWorkload
	for _, c := range b.clients {
		if !c.shown {
			continue
		}
		seen := records[c.id.cluster][store.ClientID{Username: c.id.username, UserAgent: c.id.userAgent}]
		cw := ClientWorkload{Cluster: c.id.cluster, UserName: c.id.username, UserAgent: c.id.userAgent,
			Workload: workloadOf(c.id.username, seen), ImpersonatedBy: impersonators(seen)}
		if cw.Workload != nil || cw.ImpersonatedBy != nil {
			out = append(out, cw)
		}
	}
	slices.SortFunc(out, func(x, y ClientWorkload) int {
		return cmp.Or(cmp.Compare(x.Cluster, y.Cluster), cmp.Compare(x.UserName, y.UserName), cmp.Compare(x.UserAgent, y.UserAgent))
	})
	return out
}

// impersonators are the real callers seen making requests as a client.
func impersonators(seen store.Workload) []Impersonator {
	var out []Impersonator
	for _, c := range seen.ImpersonatedBy {
		out = append(out, Impersonator{UserName: c.Username, LastSeen: c.LastSeen})
	}
	return out
}

// workloadOf describes a client: namespace and service account from its
// username, pods and addresses from what the store saw.
func workloadOf(username string, seen store.Workload) *Workload {
	var w Workload
	w.Namespace, w.ServiceAccount, _ = workload.ServiceAccount(username)
	for _, p := range seen.Pods {
		w.Pods = append(w.Pods, WorkloadPod{Name: p.Name, Node: p.Node, LastSeen: p.LastSeen})
	}
	for _, ip := range seen.SourceIPs {
		w.SourceIPs = append(w.SourceIPs, SourceIP{IP: ip.IP, LastSeen: ip.LastSeen})
	}
	if len(w.Pods) > 0 {
		kind, name := workload.Owner(w.Pods[0].Name)
		w.Owner = &Owner{Kind: kind, Name: name}
	}
	if w.Namespace == "" && len(w.Pods) == 0 && len(w.SourceIPs) == 0 {
		return nil
	}
	return &w
}
