package api

import (
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
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
	// guide finds the clients of new rows in the rows of the cell filled
	// before this one.
	guide rowGuide
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

// builder accumulates counts of one API into the 24 hourly buckets of an
// APIRequestCount status, and into the optional window.
//
// Only counts are kept while scanning. The top users of each hour and
// apiserver are chosen from those counts, and only they become byUser
// entries; what runs behind a client is looked up and described once per
// client shown, in status.workloads (see workloads).
//
// Each phase has its file: add in collect.go, with its caches in
// caches.go; the day and the ?since window in window.go; status, below,
// with render.go; workloads in workloads.go.
type builder struct {
	now      time.Time // truncated to the hour
	isSystem func(username string) bool
	hours    [hoursPerDay]hourAgg
	// nodes are the apiservers with requests to the API within the
	// retention period (from the store's metadata, and any the scan
	// meets): each is listed in every hour, with 0 when idle.
	nodes map[nodeID]bool
	// clients are the clients met, indexed by userRow.client.
	clients []client
	// verbs are the verbs met, indexed by verbRow.verb; cardinality.Verb
	// keeps them to the Kubernetes request verbs and "other".
	verbs  verbInterner
	window windowAgg

	// Caches of add: shortcuts to what the fields above hold.
	lastCell cellCursor
	clientIx clientIndex
}

func newBuilder(now time.Time, since time.Duration, isSystem func(string) bool) *builder {
	return &builder{now: now.UTC().Truncate(time.Hour), isSystem: isSystem, nodes: map[nodeID]bool{},
		verbs: newVerbInterner(), window: newWindowAgg(now, since), clientIx: newClientIndex()}
}

// status renders what was collected: the 24 hours of last24h, and the
// window when asked for.
func (b *builder) status(removedIn string, users int) sunsetv1.APIRequestCountStatus {
	st := sunsetv1.APIRequestCountStatus{RemovedInRelease: removedIn, Last24h: make([]sunsetv1.PerResourceAPIRequestLog, hoursPerDay)}
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
	if !b.window.from.IsZero() {
		st.Window = b.renderWindow(users)
	}
	return st
}
