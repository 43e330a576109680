package api

import (
	"time"

	"github.com/kube-sunset/sunset/countkey"
)

// A view is moved on from the hour before rather than read afresh, when
// that hour's view of the same query still holds every hour it read: the
// hour that leaves last24h is dropped, the hour that leaves the ?since
// window is read again and taken out of it, and the rest is kept. So the
// first query of a new hour reads two hours, not the whole window.

// rolled returns the builder of every hour before the view's current one,
// moved on from the view of the hour before, or nil if there is none that
// holds for subs. The caller holds vw.mu; rolled takes and empties the
// view of the hour before, so that a query still on it reads afresh.
func (vw *view) rolled(subs []subject, r reader) (*builder, error) {
	old := vw.rollFrom
	vw.rollFrom = nil
	if old == nil {
		return nil, nil
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	var base *builder
	switch old.holds(subs) {
	case holdsAll:
		base = old.full
	case holdsPast:
		// The hour that was current was counted in since: read again.
		base = old.past.clone()
		if err := r.collect(base, old.key.now, old.key.now); err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	old.past, old.full, old.versions, old.outputs = nil, nil, nil, nil
	if err := base.roll(r.each); err != nil {
		return nil, err
	}
	return base, nil
}

// roll moves b, which holds every hour up to its now, on to the next
// hour, as a builder of every hour before that one.
func (b *builder) roll(each eachFunc) error {
	next := b.now.Add(time.Hour)
	// The hour that leaves last24h has the index of the one that comes.
	b.hours[next.Hour()] = hourAgg{}
	if w := &b.window; !w.from.IsZero() {
		leaving := w.from
		err := each(leaving, leaving, func(k countkey.CountKey, n uint64) error {
			b.subtractWindow(k, int64(n))
			return nil
		})
		if err != nil {
			return err
		}
		w.from = leaving.Add(time.Hour)
		delete(w.hours, leaving)
	}
	b.now = next
	b.lastCell = cellCursor{}
	// As a fresh builder has them: the apiservers with cells in the day;
	// collecting adds those of the subjects' metadata.
	clear(b.nodes)
	for i := range b.hours {
		for nid := range b.hours[i].nodes {
			b.nodes[nid] = true
		}
	}
	return nil
}

// subtractWindow takes a count of the hour leaving the window out of it,
// as if addWindow had never met it.
func (b *builder) subtractWindow(k countkey.CountKey, c int64) {
	w := &b.window
	wu := w.users[k.Username]
	if wu == nil {
		return
	}
	w.total -= c
	wu.total -= c
	if wu.agents[k.UserAgent] -= c; wu.agents[k.UserAgent] == 0 {
		delete(wu.agents, k.UserAgent)
	}
	if k.Removed {
		w.removed -= c
		wu.removed -= c
	}
	if b.isSystem(k.Username) {
		w.system -= c
	}
	if wu.total == 0 {
		delete(w.users, k.Username)
	}
}
