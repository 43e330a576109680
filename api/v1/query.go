package v1

import (
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/catalog"
)

// Bounds of ?users=.
const (
	DefaultUsersToReport = 10
	MaxUsersToReport     = 100
)

// Values of ?state=.
const (
	StateDeprecated = catalog.StateDeprecated
	StateRemoved    = catalog.StateRemoved
)

// Query holds the parameters of a read: the same for the HTTP API and for
// readers of a data directory.
type Query struct {
	// Users is how many users are reported per node and hour.
	Users int
	// Cluster keeps only this cluster's apiservers; empty means all.
	Cluster string
	// RemovedIn keeps only APIs removed in this release (lists only).
	RemovedIn catalog.Release
	// RemovedBefore keeps only APIs removed before this release (lists only).
	RemovedBefore catalog.Release
	// State is "", StateDeprecated or StateRemoved (lists only).
	State string
	// Since adds status.window over this much time before now, whole hours.
	Since time.Duration
	// User keeps only APIs this username called in the window (the last
	// 24 hours without Since) (lists only).
	User string
	// Hourly adds status.window.byHour: the window's hours with requests.
	// It needs Since.
	Hourly bool
}

// DefaultQuery is a Query with every default.
func DefaultQuery() Query { return Query{Users: DefaultUsersToReport} }

// Values encodes q as URL parameters, leaving defaults out.
func (q Query) Values() url.Values {
	v := url.Values{}
	if q.Users != 0 && q.Users != DefaultUsersToReport {
		v.Set("users", strconv.Itoa(q.Users))
	}
	set := func(key, val string) {
		if val != "" {
			v.Set(key, val)
		}
	}
	set("cluster", q.Cluster)
	set("removedRelease", q.RemovedIn.String())
	set("removedBefore", q.RemovedBefore.String())
	set("state", q.State)
	set("user", q.User)
	if q.Since > 0 {
		v.Set("since", q.Since.String())
	}
	if q.Hourly {
		v.Set("hourly", "true")
	}
	return v
}

// WebhookQuery holds the parameters of a webhook counts read.
type WebhookQuery struct {
	// Cluster keeps only this cluster; empty means all.
	Cluster string
	// Since adds a window over this much time before now, whole hours.
	Since time.Duration
	// Class keeps only resources of this class; empty means all.
	Class admission.Class
}

// Values encodes q as URL parameters, leaving defaults out.
func (q WebhookQuery) Values() url.Values {
	v := Query{Cluster: q.Cluster, Since: q.Since}.Values()
	if q.Class != "" {
		v.Set("class", string(q.Class))
	}
	return v
}

// ErrNotFound is what reading one object answers when there is none: the
// client's error for the server's 404 NotFound, and a data directory's for
// an API or webhook without counts. Commands tell "none" from a failure by
// it, whichever source they read.
var ErrNotFound = errors.New("api: not found")
