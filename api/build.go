package api

import (
	"cmp"
	"slices"
	"time"

	"github.com/kube-sunset/sunset/store"
)

// hoursPerDay is the length of last24h.
const hoursPerDay = 24

type nodeID struct{ cluster, node string }
type userID struct{ username, userAgent string }

type hourAgg struct {
	total   int64
	removed int64
	system  int64
	nodes   map[nodeID]*nodeAgg
}

type nodeAgg struct {
	total int64
	users map[userID]*userAgg
}

type userAgg struct {
	total   int64
	removed int64
	verbs   map[string]int64
}

// builder accumulates counts of one API into the 24 hourly buckets of an
// APIRequestCount status.
type builder struct {
	now      time.Time // truncated to the hour
	isSystem func(username string) bool
	hours    [hoursPerDay]hourAgg
}

func newBuilder(now time.Time, isSystem func(string) bool) *builder {
	return &builder{now: now.UTC().Truncate(time.Hour), isSystem: isSystem}
}

// window is the range of hours the status covers.
func (b *builder) window() (from, to time.Time) {
	return b.now.Add(-(hoursPerDay - 1) * time.Hour), b.now
}

func (b *builder) add(k store.CountKey, n uint64) error {
	from, to := b.window()
	if k.Hour.Before(from) || k.Hour.After(to) {
		return nil
	}
	h := &b.hours[k.Hour.Hour()]
	if h.nodes == nil {
		h.nodes = map[nodeID]*nodeAgg{}
	}
	nid := nodeID{k.Cluster, k.Node}
	na := h.nodes[nid]
	if na == nil {
		na = &nodeAgg{users: map[userID]*userAgg{}}
		h.nodes[nid] = na
	}
	uid := userID{k.Username, k.UserAgent}
	ua := na.users[uid]
	if ua == nil {
		ua = &userAgg{verbs: map[string]int64{}}
		na.users[uid] = ua
	}
	c := int64(n)
	h.total += c
	na.total += c
	ua.total += c
	ua.verbs[k.Verb] += c
	if k.Removed {
		h.removed += c
		ua.removed += c
	}
	if b.isSystem(k.Username) {
		h.system += c
	}
	return nil
}

func (b *builder) status(removedIn string, users int) APIRequestCountStatus {
	st := APIRequestCountStatus{RemovedInRelease: removedIn, Last24h: make([]PerResourceAPIRequestLog, hoursPerDay)}
	for i := range b.hours {
		st.Last24h[i] = b.renderHour(&b.hours[i], users)
		st.RequestCount += st.Last24h[i].RequestCount
		st.RemovedRequestCount += b.hours[i].removed
		st.SystemRequestCount += b.hours[i].system
	}
	st.Removed = st.RemovedRequestCount > 0
	st.CurrentHour = st.Last24h[b.now.Hour()]
	return st
}

func (b *builder) renderHour(h *hourAgg, users int) PerResourceAPIRequestLog {
	out := PerResourceAPIRequestLog{RequestCount: h.total}
	for nid, na := range h.nodes {
		node := PerNodeAPIRequestLog{NodeName: nid.node, Cluster: nid.cluster, RequestCount: na.total, ByUser: []PerUserAPIRequestCount{}}
		for uid, ua := range na.users {
			u := PerUserAPIRequestCount{UserName: uid.username, UserAgent: uid.userAgent, RequestCount: ua.total,
				System: b.isSystem(uid.username), RemovedRequestCount: ua.removed}
			for verb, c := range ua.verbs {
				u.ByVerb = append(u.ByVerb, PerVerbAPIRequestCount{Verb: verb, RequestCount: c})
			}
			slices.SortFunc(u.ByVerb, func(a, b PerVerbAPIRequestCount) int { return cmp.Compare(a.Verb, b.Verb) })
			node.ByUser = append(node.ByUser, u)
		}
		// Top users first; ties in a stable, readable order.
		slices.SortFunc(node.ByUser, func(a, b PerUserAPIRequestCount) int {
			return cmp.Or(cmp.Compare(b.RequestCount, a.RequestCount), cmp.Compare(a.UserName, b.UserName), cmp.Compare(a.UserAgent, b.UserAgent))
		})
		if len(node.ByUser) > users {
			node.ByUser = node.ByUser[:users]
		}
		out.ByNode = append(out.ByNode, node)
	}
	slices.SortFunc(out.ByNode, func(a, b PerNodeAPIRequestLog) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.NodeName, b.NodeName))
	})
	return out
}
