package auditcount

import (
	"strconv"
	"strings"
	"time"
)

// ByAPI sums the requests keep accepts (nil: all) per API.
func (c *Counter) ByAPI(keep func(Request) bool) map[string]int64 {
	out := map[string]int64{}
	for _, r := range c.Requests {
		if keep == nil || keep(r) {
			out[r.API]++
		}
	}
	return out
}

// Count sums the requests keep accepts (nil: all).
func (c *Counter) Count(keep func(Request) bool) int64 {
	var n int64
	for _, r := range c.Requests {
		if keep == nil || keep(r) {
			n++
		}
	}
	return n
}

// Last24h keeps the requests of last24h: now's UTC hour and the 23
// before it.
func Last24h(now time.Time) func(Request) bool {
	to := now.UTC().Truncate(time.Hour)
	return hours(to.Add(-23*time.Hour), to)
}

// Window keeps the requests of a window of ?since=d: from the hour d
// before now, up to now's hour.
func Window(now time.Time, d time.Duration) func(Request) bool {
	return hours(now.UTC().Add(-d).Truncate(time.Hour), now.UTC().Truncate(time.Hour))
}

// Hour keeps the requests of one hour.
func Hour(h time.Time) func(Request) bool { return hours(h, h) }

func hours(from, to time.Time) func(Request) bool {
	return func(r Request) bool { return !r.Hour.Before(from) && !r.Hour.After(to) }
}

// ReleaseLess compares releases such as "1.15" and "v1.9" by number.
func ReleaseLess(a, b string) bool {
	parse := func(s string) [2]int {
		var r [2]int
		major, minor, _ := strings.Cut(strings.TrimPrefix(s, "v"), ".")
		r[0], _ = strconv.Atoi(major)
		r[1], _ = strconv.Atoi(minor)
		return r
	}
	x, y := parse(a), parse(b)
	return x[0] < y[0] || x[0] == y[0] && x[1] < y[1]
}

// And keeps what every filter keeps.
func And(keep ...func(Request) bool) func(Request) bool {
	return func(r Request) bool {
		for _, k := range keep {
			if !k(r) {
				return false
			}
		}
		return true
	}
}

// NotSystem keeps requests of users that are not system traffic.
func NotSystem(r Request) bool { return !r.System }
