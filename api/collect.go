package api

import (
	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/countkey"
)

func (b *builder) add(k countkey.CountKey, n uint64) error {
	c := int64(n)
	if !b.window.from.IsZero() && !k.Hour.Before(b.window.from) {
		b.addWindow(k, c)
	}
	from, to := b.day()
	if k.Hour.Before(from) || k.Hour.After(to) {
		return nil
	}
	hi := k.Hour.Hour()
	h := &b.hours[hi]
	nid := nodeID{k.Cluster, k.Node}
	cl := b.lastCell.at(hi, nid)
	if cl == nil {
		cl = b.openCell(h, hi, nid)
	}
	ci := b.client(k, cl)
	// Verbs are stored bounded already; older data may hold others.
	verb := b.verbs.intern(k.Verb)
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

// openCell returns the cell of apiserver nid in h, the hour hi, adding it
// when new, for the keys that follow.
func (b *builder) openCell(h *hourAgg, hi int, nid nodeID) *cell {
	if h.nodes == nil {
		h.nodes = map[nodeID]*cell{}
	}
	cl := h.nodes[nid]
	if cl == nil {
		cl = &cell{}
		if last := b.lastCell.cell; last != nil {
			// Sized like the last cell, so that rows are not copied
			// while the cell grows.
			cl.rows = make([]userRow, 0, len(last.rows)+len(last.rows)/8)
			cl.verbs = make([]verbRow, 0, len(last.verbs)+len(last.verbs)/8)
			cl.guide.rows = last.rows
		}
		h.nodes[nid] = cl
		b.nodes[nid] = true
	}
	b.lastCell.move(cl, hi, nid)
	return cl
}

// client returns the index of k's client, adding it when new; cl is the
// cell k counts in.
func (b *builder) client(k countkey.CountKey, cl *cell) int32 {
	// A pointer: passed by value, id is copied into the inlined caches for
	// every key, which made BenchmarkBuild about 8% slower.
	id := &clientID{k.Cluster, k.Username, k.UserAgent}
	if ci, ok := b.clientIx.recent(b.clients, id, &cl.guide); ok {
		return ci
	}
	ci, ok := b.clientIx.lookup(*id)
	if !ok {
		ci = int32(len(b.clients))
		b.clients = append(b.clients, client{id: *id, system: b.isSystem(k.Username)})
		b.clientIx.add(*id, ci)
	}
	b.clientIx.met(ci, &cl.guide)
	return ci
}

// verbInterner numbers the verbs met by their names as cardinality.Verb
// bounds them.
type verbInterner struct {
	names []string // by index
	ix    map[string]uint16
	raw   rawVerbCache
}

func newVerbInterner() verbInterner {
	return verbInterner{ix: map[string]uint16{}}
}

// intern returns the index of a raw verb's bounded name.
func (v *verbInterner) intern(raw string) uint16 {
	if vi, ok := v.raw.find(raw); ok {
		return vi
	}
	name := cardinality.Verb(raw)
	vi, ok := v.ix[name]
	if !ok {
		vi = uint16(len(v.names))
		v.names = append(v.names, name)
		v.ix[name] = vi
	}
	v.raw.add(raw, vi)
	return vi
}
