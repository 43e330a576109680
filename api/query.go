package api

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/verdict"
)

var (
	getParams  = []string{"cluster", "hourly", "since", "users"}
	listParams = []string{"cluster", "hourly", "removedBefore", "removedRelease", "since", "state", "user", "users"}
)

// ParseQuery reads URL parameters, allowing only those in allowed, with
// every problem in one error.
func ParseQuery(v url.Values, allowed []string, maxSince time.Duration) (sunsetv1.Query, error) {
	q := sunsetv1.DefaultQuery()
	var problems []string
	for key := range v {
		if !slices.Contains(allowed, key) {
			problems = append(problems, fmt.Sprintf("unknown parameter %q (known: %s)", key, strings.Join(allowed, ", ")))
		}
	}
	if s := v.Get("users"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > sunsetv1.MaxUsersToReport {
			problems = append(problems, fmt.Sprintf("users must be a whole number from 0 to %d (0 means the default, %d)", sunsetv1.MaxUsersToReport, sunsetv1.DefaultUsersToReport))
		}
		// OpenShift reads 0 as its default of 10.
		if n == 0 {
			n = sunsetv1.DefaultUsersToReport
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
	case "", sunsetv1.StateDeprecated, sunsetv1.StateRemoved:
	default:
		problems = append(problems, fmt.Sprintf("state %q is not valid; use %s or %s", q.State, sunsetv1.StateDeprecated, sunsetv1.StateRemoved))
	}
	if s := v.Get("since"); s != "" {
		d, problem := parseHours("since", s, maxSince)
		if problem != "" {
			problems = append(problems, problem)
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

// parseHours reads a duration parameter in whole hours, at least 1h and,
// with maxSince, at most the retention; problem says what is wrong.
func parseHours(key, s string, maxSince time.Duration) (d time.Duration, problem string) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil || d < time.Hour:
		return d, fmt.Sprintf("%s %q is not a duration of at least 1h, such as 24h or 168h", key, s)
	case d%time.Hour != 0:
		// Counts are hourly: a window of 90m would be read as 2h
		// and named as neither.
		return d, fmt.Sprintf("%s %q is not whole hours; counts are hourly (%s or %s)", key, s, verdict.FormatDuration(d.Truncate(time.Hour)), verdict.FormatDuration(d.Truncate(time.Hour)+time.Hour))
	case maxSince > 0 && d > maxSince:
		return d, fmt.Sprintf("%s %s is longer than the retention of %s", key, d, maxSince)
	}
	return d, ""
}

// matches applies the list filters to a built object; calledByUser says
// whether q.User called it.
func matches(q sunsetv1.Query, obj sunsetv1.APIRequestCount, calledByUser bool) bool {
	st := obj.Status
	removedIn, _ := catalog.ParseRelease(st.RemovedInRelease)
	switch {
	case !q.RemovedIn.IsZero() && removedIn != q.RemovedIn:
		return false
	case !q.RemovedBefore.IsZero() && (removedIn.IsZero() || !removedIn.Less(q.RemovedBefore)):
		return false
	case q.State == sunsetv1.StateRemoved && st.RemovedRequestCount == 0:
		return false
	case q.State == sunsetv1.StateDeprecated && st.RequestCount-st.RemovedRequestCount == 0:
		return false
	case q.User != "" && !calledByUser:
		return false
	}
	return true
}
