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
type userID struct{ username, userAgent string }

type hourAgg struct {
	total, dry int64
	removed    int64
	system     int64
	nodes      map[nodeID]*nodeAgg
}

type nodeAgg struct {
	total, dry int64
	system     int64
	users      map[userID]*userAgg
}

type userAgg struct {
	total, dry int64
	removed    int64
	verbs      map[string][2]int64 // requests, dry runs
}

// windowUser accumulates one username over the window.
type windowUser struct {
	total, removed int64
	agents         map[string]int64
}

// builder accumulates counts of one API into the 24 hourly buckets of an
// APIRequestCount status, and into the optional window.
type builder struct {
	now      time.Time // truncated to the hour
	isSystem func(username string) bool
	hours    [hoursPerDay]hourAgg
	// nodes are the apiservers with requests to the API within the
	// retention period (from the store's metadata, and any the scan
	// meets): each is listed in every hour, with 0 when idle.
	nodes map[nodeID]bool
	// workloads by cluster, then client.
	workloads map[string]map[store.ClientID]store.Workload

	since       time.Duration
	windowFrom  time.Time // zero without a window
	windowTotal int64
	windowRem   int64
	windowSys   int64
	windowUsers map[string]*windowUser
	// windowHours is nil unless the window's hours are wanted (?hourly).
	windowHours map[time.Time]*HourCount
	// usernames seen in the window, or in the last 24 hours without one.
	usernames map[string]bool
}

func newBuilder(now time.Time, since time.Duration, isSystem func(string) bool) *builder {
	b := &builder{now: now.UTC().Truncate(time.Hour), isSystem: isSystem, since: since, usernames: map[string]bool{},
		workloads: map[string]map[store.ClientID]store.Workload{}, nodes: map[nodeID]bool{}}
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

func (b *builder) add(k store.CountKey, n uint64) error {
	c := int64(n)
	if !b.windowFrom.IsZero() && !k.Hour.Before(b.windowFrom) {
		b.addWindow(k, c)
	}
	from, to := b.day()
	if k.Hour.Before(from) || k.Hour.After(to) {
		return nil
	}
	if b.windowFrom.IsZero() {
		b.usernames[k.Username] = true
	}
	h := &b.hours[k.Hour.Hour()]
	if h.nodes == nil {
		h.nodes = map[nodeID]*nodeAgg{}
	}
	nid := nodeID{k.Cluster, k.Node}
	b.nodes[nid] = true
	na := h.nodes[nid]
	if na == nil {
		na = &nodeAgg{users: map[userID]*userAgg{}}
		h.nodes[nid] = na
	}
	uid := userID{k.Username, k.UserAgent}
	ua := na.users[uid]
	if ua == nil {
		ua = &userAgg{verbs: map[string][2]int64{}}
		na.users[uid] = ua
	}
	h.total += c
	na.total += c
	ua.total += c
	// Verbs are stored bounded already; older data may hold others.
	verb := cardinality.Verb(k.Verb)
	v := ua.verbs[verb]
	v[0] += c
	if k.DryRun {
		v[1] += c
		h.dry += c
		na.dry += c
		ua.dry += c
	}
	ua.verbs[verb] = v
	if k.Removed {
		h.removed += c
		ua.removed += c
	}
	if b.isSystem(k.Username) {
		h.system += c
		na.system += c
	}
	return nil
}

func (b *builder) addWindow(k store.CountKey, c int64) {
	b.usernames[k.Username] = true
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
	for i := range b.hours {
		st.Last24h[i] = b.renderHour(&b.hours[i], users)
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

func (b *builder) renderHour(h *hourAgg, users int) PerResourceAPIRequestLog {
	out := PerResourceAPIRequestLog{RequestCount: h.total, SystemRequestCount: h.system, DryRunCount: h.dry,
		ByNode: make([]PerNodeAPIRequestLog, 0, len(b.nodes))}
	// The busiest apiservers are kept when there are more than the schema
	// allows; idle ones (no entry in h.nodes) count 0.
	nids := slices.Collect(maps.Keys(b.nodes))
	total := func(nid nodeID) int64 {
		if na := h.nodes[nid]; na != nil {
			return na.total
		}
		return 0
	}
	byName := func(x, y nodeID) int { return cmp.Or(cmp.Compare(x.cluster, y.cluster), cmp.Compare(x.node, y.node)) }
	if len(nids) > MaxNodesPerHour {
		slices.SortFunc(nids, func(x, y nodeID) int { return cmp.Or(cmp.Compare(total(y), total(x)), byName(x, y)) })
		out.ByNodeOmitted = len(nids) - MaxNodesPerHour
		nids = nids[:MaxNodesPerHour]
	}
	slices.SortFunc(nids, byName)
	for _, nid := range nids {
		node := PerNodeAPIRequestLog{NodeName: nid.node, Cluster: nid.cluster, ByUser: []PerUserAPIRequestCount{}}
		na := h.nodes[nid]
		if na == nil {
			out.ByNode = append(out.ByNode, node)
			continue
		}
		node.RequestCount, node.DryRunCount, node.SystemRequestCount = na.total, na.dry, na.system
		for uid, ua := range na.users {
			seen := b.workloads[nid.cluster][store.ClientID{Username: uid.username, UserAgent: uid.userAgent}]
			u := PerUserAPIRequestCount{UserName: uid.username, UserAgent: uid.userAgent, RequestCount: ua.total,
				System: b.isSystem(uid.username), RemovedRequestCount: ua.removed, DryRunCount: ua.dry,
				Workload: workloadOf(uid.username, seen), ImpersonatedBy: impersonators(seen)}
			for verb, c := range ua.verbs {
				u.ByVerb = append(u.ByVerb, PerVerbAPIRequestCount{Verb: verb, RequestCount: c[0], DryRunCount: c[1]})
			}
			slices.SortFunc(u.ByVerb, func(a, b PerVerbAPIRequestCount) int { return cmp.Compare(a.Verb, b.Verb) })
			node.ByUser = append(node.ByUser, u)
		}
		// Top users first; ties in a stable, readable order.
		slices.SortFunc(node.ByUser, func(a, b PerUserAPIRequestCount) int {
			return cmp.Or(cmp.Compare(b.RequestCount, a.RequestCount), cmp.Compare(a.UserName, b.UserName), cmp.Compare(a.UserAgent, b.UserAgent))
		})
		if len(node.ByUser) > users {
			node.ByUserOmitted = len(node.ByUser) - users
			node.ByUser = node.ByUser[:users]
		}
		out.ByNode = append(out.ByNode, node)
	}
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
