package api

import (
	"cmp"
	"maps"
	"slices"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

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
		verbs: make([][2]int64, len(b.verbs.names))}
	r.tooManyNodes = len(b.nodes) > MaxNodesPerHour
	if !r.tooManyNodes {
		r.nodes = slices.SortedFunc(maps.Keys(b.nodes), byName)
	}
	for i := range b.verbs.names {
		r.verbOrder = append(r.verbOrder, uint16(i))
	}
	slices.SortFunc(r.verbOrder, func(x, y uint16) int { return cmp.Compare(b.verbs.names[x], b.verbs.names[y]) })
	return r
}

func (r *renderer) hour(h *hourAgg) sunsetv1.PerResourceAPIRequestLog {
	out := sunsetv1.PerResourceAPIRequestLog{RequestCount: h.total, SystemRequestCount: h.system, DryRunCount: h.dry}
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
	out.ByNode = make([]sunsetv1.PerNodeAPIRequestLog, 0, len(nids))
	for _, nid := range nids {
		node := sunsetv1.PerNodeAPIRequestLog{NodeName: nid.node, Cluster: nid.cluster, ByUser: []sunsetv1.PerUserAPIRequestCount{}}
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
func (r *renderer) topUsers(cl *cell) ([]sunsetv1.PerUserAPIRequestCount, int) {
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
	out := make([]sunsetv1.PerUserAPIRequestCount, 0, len(top))
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
func (r *renderer) entry(cl *cell, i int32) sunsetv1.PerUserAPIRequestCount {
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
	u := sunsetv1.PerUserAPIRequestCount{UserName: c.id.username, UserAgent: c.id.userAgent, RequestCount: row.total,
		System: c.system, RemovedRequestCount: row.removed, DryRunCount: row.dry,
		ByVerb: make([]sunsetv1.PerVerbAPIRequestCount, 0, nverbs)}
	for _, vi := range r.verbOrder {
		if v := r.verbs[vi]; v != [2]int64{} {
			u.ByVerb = append(u.ByVerb, sunsetv1.PerVerbAPIRequestCount{Verb: r.b.verbs.names[vi], RequestCount: v[0], DryRunCount: v[1]})
		}
	}
	return u
}
