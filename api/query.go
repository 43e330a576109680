package api

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

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

var (
	getParams  = []string{"cluster", "hourly", "since", "users"}
	listParams = []string{"cluster", "hourly", "removedBefore", "removedRelease", "since", "state", "user", "users"}
)

// ParseQuery reads URL parameters, allowing only those in allowed, with
// every problem in one error.
func ParseQuery(v url.Values, allowed []string, maxSince time.Duration) (Query, error) {
	q := DefaultQuery()
	var problems []string
	for key := range v {
		if !slices.Contains(allowed, key) {
			problems = append(problems, fmt.Sprintf("unknown parameter %q (known: %s)", key, strings.Join(allowed, ", ")))
		}
	}
	if s := v.Get("users"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > MaxUsersToReport {
			problems = append(problems, fmt.Sprintf("users must be a whole number from 0 to %d (0 means the default, %d)", MaxUsersToReport, DefaultUsersToReport))
		}
		// OpenShift reads 0 as its default of 10.
		if n == 0 {
			n = DefaultUsersToReport
		}
		q.Users = n
	}
	q.Cluster = v.Get("cluster")
	q.User = v.Get("user")
	for key, dst := range map[string]*catalog.Release{"removedRelease": &q.RemovedIn, "removedBefore": &q.RemovedBefore} {
		if s := v.Get(key); s != "" {
			r, err := catalog.ParseRelease(s)
			if err != nil {
				problems = append(problems, key+": "+err.Error())
			}
			*dst = r
		}
	}
	switch q.State = v.Get("state"); q.State {
	case "", StateDeprecated, StateRemoved:
	default:
		problems = append(problems, fmt.Sprintf("state %q is not valid; use %s or %s", q.State, StateDeprecated, StateRemoved))
	}
	if s := v.Get("since"); s != "" {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil || d < time.Hour:
			problems = append(problems, fmt.Sprintf("since %q is not a duration of at least 1h, such as 24h or 168h", s))
		case maxSince > 0 && d > maxSince:
			problems = append(problems, fmt.Sprintf("since %s is longer than the retention of %s", d, maxSince))
		}
		q.Since = d
	}
	if s := v.Get("hourly"); s != "" {
		b, err := strconv.ParseBool(s)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("hourly %q is not true or false", s))
		case b && v.Get("since") == "":
			problems = append(problems, "hourly needs since: the hours listed are those of the window, e.g. since=168h")
		}
		q.Hourly = b
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return q, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return q, nil
}

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

// matches applies the list filters to a built object.
func (q Query) matches(obj APIRequestCount, calledBy func(username string) bool) bool {
	st := obj.Status
	removedIn, _ := catalog.ParseRelease(st.RemovedInRelease)
	switch {
	case !q.RemovedIn.IsZero() && removedIn != q.RemovedIn:
		return false
	case !q.RemovedBefore.IsZero() && (removedIn.IsZero() || !removedIn.Less(q.RemovedBefore)):
		return false
	case q.State == StateRemoved && st.RemovedRequestCount == 0:
		return false
	case q.State == StateDeprecated && st.RequestCount-st.RemovedRequestCount == 0:
		return false
	case q.User != "" && !calledBy(q.User):
		return false
	}
	return true
}
