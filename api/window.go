package api

import (
	"cmp"
	"slices"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
)

// day is the range of hours last24h covers.
func (b *builder) day() (from, to time.Time) {
	return b.now.Add(-(hoursPerDay - 1) * time.Hour), b.now
}

// scanRange covers both the day and the window.
func (b *builder) scanRange() (from, to time.Time) {
	from, to = b.day()
	if !b.window.from.IsZero() && b.window.from.Before(from) {
		from = b.window.from
	}
	return from, to
}

// calledBy reports whether username made requests in the window, or in
// the last 24 hours without one.
func (b *builder) calledBy(username string) bool {
	if !b.window.from.IsZero() {
		return b.window.users[username] != nil
	}
	// From the cells, not b.clients: a builder moved on to a new hour
	// (roll) keeps the clients of the hour that left.
	for i := range b.hours {
		for _, cl := range b.hours[i].nodes {
			for _, row := range cl.rows {
				if b.clients[row.client].id.username == username {
					return true
				}
			}
		}
	}
	return false
}

// windowUser accumulates one username over the window.
type windowUser struct {
	total, removed int64
	agents         map[string]int64
	// last is the latest hour with requests.
	last time.Time
}

// windowAgg accumulates the ?since window, by username rather than by
// hour and apiserver.
type windowAgg struct {
	since                  time.Duration
	from                   time.Time // zero without a window
	total, removed, system int64
	users                  map[string]*windowUser
	// hours is nil unless the window's hours are wanted (?hourly).
	hours map[time.Time]*sunsetv1.HourCount
}

func newWindowAgg(now time.Time, since time.Duration) windowAgg {
	w := windowAgg{since: since}
	if since > 0 {
		w.from = now.UTC().Add(-since).Truncate(time.Hour)
		w.users = map[string]*windowUser{}
	}
	return w
}

func (b *builder) addWindow(k countkey.CountKey, c int64) {
	w := &b.window
	w.total += c
	wu := w.users[k.Username]
	if wu == nil {
		wu = &windowUser{agents: map[string]int64{}}
		w.users[k.Username] = wu
	}
	wu.total += c
	wu.agents[k.UserAgent] += c
	if c > 0 && k.Hour.After(wu.last) {
		wu.last = k.Hour
	}
	system := b.isSystem(k.Username)
	if k.Removed {
		w.removed += c
		wu.removed += c
	}
	if system {
		w.system += c
	}
	if w.hours != nil {
		h := w.hours[k.Hour]
		if h == nil {
			h = &sunsetv1.HourCount{Hour: k.Hour.UTC()}
			w.hours[k.Hour] = h
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
	if !b.window.from.IsZero() {
		b.window.hours = map[time.Time]*sunsetv1.HourCount{}
	}
}

// maxWindowAgents bounds the user agents listed per window user.
const maxWindowAgents = 3

func (b *builder) renderWindow(users int) *sunsetv1.Window {
	bw := &b.window
	w := &sunsetv1.Window{Since: bw.since.String(), From: bw.from, RequestCount: bw.total,
		RemovedRequestCount: bw.removed, SystemRequestCount: bw.system, ByUser: []sunsetv1.WindowUser{}}
	for name, wu := range bw.users {
		u := sunsetv1.WindowUser{UserName: name, RequestCount: wu.total, RemovedRequestCount: wu.removed, System: b.isSystem(name), LastSeen: wu.last.UTC()}
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
	slices.SortFunc(w.ByUser, func(x, y sunsetv1.WindowUser) int {
		return cmp.Or(cmp.Compare(y.RequestCount, x.RequestCount), cmp.Compare(x.UserName, y.UserName))
	})
	if len(w.ByUser) > users {
		w.ByUser = w.ByUser[:users]
	}
	for _, h := range bw.hours {
		w.ByHour = append(w.ByHour, *h)
	}
	slices.SortFunc(w.ByHour, func(x, y sunsetv1.HourCount) int { return x.Hour.Compare(y.Hour) })
	return w
}
