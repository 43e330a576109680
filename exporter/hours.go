package exporter

import (
	"time"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// apiRef names one API of one cluster.
type apiRef struct{ cluster, api string }

// apiHours is what the scans of one API of one cluster added up, by hour
// and raw series, kept from scrape to scrape: a scrape rescans only what
// the store's versions say may have changed since (store.Versions):
// nothing while the API is idle, the hours from the last scrape's while
// it is called, every hour after a late request or a deletion.
type apiHours struct {
	versions store.Versions
	// current was the current hour when the API was last scanned: the
	// hours before it hold while versions.Past stays the same.
	current time.Time
	hours   map[time.Time]map[rawSeries]float64
	// series are the sums over the window that hours gave for the
	// window starting at summedFrom; nil once hours changed.
	series     map[rawSeries]*float64
	summedFrom time.Time
}

// hourCache keeps an apiHours per API of each cluster, for one Collector;
// compute uses it under the collector's cache lock.
type hourCache struct {
	by map[apiRef]*apiHours
	// seen marks the APIs met by the compute under way: the others are
	// dropped after it.
	seen map[apiRef]bool
}

// series returns the raw series of one API over [graceStart, cur], each
// with its sum over the hours from windowStart: those seen in the grace
// period only are 0. The caller must not change what it gets.
func (c *hourCache) series(q Querier, info store.APIInfo, system *systemCache, cur, windowStart, graceStart time.Time) (map[rawSeries]*float64, error) {
	if c.by == nil {
		c.by, c.seen = map[apiRef]*apiHours{}, map[apiRef]bool{}
	}
	ref := apiRef{info.Cluster, info.API}
	c.seen[ref] = true
	e := c.by[ref]
	var from time.Time // the first hour to scan; zero for none
	switch {
	case e == nil || e.versions.Past != info.Versions.Past:
		e = &apiHours{hours: map[time.Time]map[rawSeries]float64{}}
		c.by[ref] = e
		from = graceStart
	case e.versions.Writes != info.Versions.Writes:
		// Counted since, but not before its hour: only the hours from
		// the one current at the last scan can have changed.
		from = e.current
	}
	for h := range e.hours {
		if h.Before(graceStart) || (!from.IsZero() && !h.Before(from)) {
			delete(e.hours, h)
			e.series = nil
		}
	}
	if !from.IsZero() {
		e.series = nil
		err := q.ScanCounts(info.Cluster, info.API, maxTime(from, graceStart), cur, func(k countkey.CountKey, n uint64) error {
			rk := rawSeries{subresource: k.Subresource, verb: k.Verb, dryRun: k.DryRun, system: system.of(k.Username), removed: k.Removed}
			h := e.hours[k.Hour]
			if h == nil {
				h = map[rawSeries]float64{}
				e.hours[k.Hour] = h
			}
			h[rk] += float64(n)
			return nil
		})
		if err != nil {
			delete(c.by, ref)
			return nil, err
		}
	}
	e.versions, e.current = info.Versions, cur
	if e.series == nil || !e.summedFrom.Equal(windowStart) {
		e.series, e.summedFrom = e.sum(windowStart), windowStart
	}
	return e.series, nil
}

// sum adds up the hours from windowStart by raw series; a series met only
// before windowStart, in the grace period, is 0.
func (e *apiHours) sum(windowStart time.Time) map[rawSeries]*float64 {
	out := map[rawSeries]*float64{}
	for h, series := range e.hours {
		for rk, n := range series {
			v := out[rk]
			if v == nil {
				v = new(float64)
				out[rk] = v
			}
			if !h.Before(windowStart) {
				*v += n
			}
		}
	}
	return out
}

// forgetUnseen drops what was kept of the APIs the last compute did not
// meet: deleted, or expired.
func (c *hourCache) forgetUnseen() {
	for ref := range c.by {
		if !c.seen[ref] {
			delete(c.by, ref)
		}
	}
	clear(c.seen)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
