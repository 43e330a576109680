package benchmarks

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/querybench"
)

// The steady run: steadyShape's hourly load for steadyDays simulated days
// with a retention of half as many, so that the second half shows whether
// the disk levels off. Deleted hours are freed only when a compaction
// rewrites their tables, which Store.Maintain has badger do once a day
// (Store.Compact); the test is that the disk is level from the first day
// after the retention period on: no day above it by more than
// steadyGrowth. Without the daily compaction the disk rose on for about
// 20 days more, to 2.2 times day 31's (benchmarks/README.md, Scale).
var steadyShape = scaleBase

const (
	steadyDays   = 60
	steadyGrowth = 0.05
)

// steadySweepHours is how often, in simulated hours, the steady run
// deletes expired hours. Store.Maintain does it every hour; every hour
// here would scan the whole store 1,440 times. Every 4 hours, an
// expiring hour's records are at most 4 hours late. A sweep deletes the
// expired keys among 10,000 in one badger transaction, and an API's count
// keys of one hour lie side by side: about 6,600 of them (190 bytes each)
// fill a transaction, and more fail the sweep with ErrTxnTooBig.
const steadySweepHours = 4

// steadyRun counts shape's hourly load for days simulated days, each hour
// on the store's clock, with a retention of days/2; every
// steadySweepHours it deletes the expired hours as Store.Maintain does
// (Sweep, then the value log's garbage collection), and at the end of each
// day it closes the store and adds up its files. It returns the bytes after each day.
func steadyRun(b *testing.B, shape scaleShape, days int) []int64 {
	retentionDays := days / 2
	retention := time.Duration(retentionDays) * 24 * time.Hour
	dir := b.TempDir()
	start := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	var now time.Time
	clock := func() time.Time { return now }
	s, err := openScaleStore(dir, shape, retention, clock)
	if err != nil {
		b.Fatal(err)
	}
	w := newHourWriter(s, shape, 16384)
	disk := make([]int64, days)
	began := time.Now()
	var swept, uncompacted int
	var sweeping time.Duration
	compactedDay := -1
	for d := range days {
		for hr := range 24 {
			h := start.Add(time.Duration(d*24+hr) * time.Hour)
			now = h.Add(59 * time.Minute)
			if err := w.hour(h, hr == 0); err != nil {
				b.Fatal(err)
			}
			if err := w.flush(); err != nil {
				b.Fatal(err)
			}
			if (hr+1)%steadySweepHours != 0 {
				continue
			}
			sweepStart := time.Now()
			n, err := w.s.Sweep()
			if err != nil {
				b.Fatal(err)
			}
			swept += n
			uncompacted += n
			// As Store.Maintain: once a day, after a sweep that deleted.
			if d > compactedDay && uncompacted > 0 {
				if err := w.s.Compact(); err != nil {
					b.Fatal(err)
				}
				compactedDay, uncompacted = d, 0
			}
			if err := w.s.CollectGarbage(); err != nil {
				b.Fatal(err)
			}
			sweeping += time.Since(sweepStart)
		}
		if err := w.s.Close(); err != nil {
			b.Fatal(err)
		}
		disk[d] = dirSize(b, dir)
		if w.s, err = openScaleStore(dir, shape, retention, clock); err != nil {
			b.Fatal(err)
		}
	}
	// What is kept at the end is exactly the hours of the retention
	// period, and the last hour, kept for the retention period after its
	// end: the sweeps deleted every expired hour and no other.
	last := start.Add(time.Duration(days*24-1) * time.Hour)
	liveHours := int64(retentionDays*24 + 1)
	var kept int64
	for c := range shape.Clusters {
		if err := w.s.ScanCounts(clusterName(c), querybench.MainAPI, start, last, func(_ countkey.CountKey, n uint64) error {
			kept += int64(n)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	if want := liveHours * shape.mainPerNodeHour() * int64(shape.Nodes*shape.Clusters); kept != want {
		b.Fatalf("the store keeps %d requests of %s after %d days; the last %d hours hold %d", kept, querybench.MainAPI, days, liveHours, want)
	}
	if err := w.s.Close(); err != nil {
		b.Fatal(err)
	}
	full, final := disk[retentionDays], disk[days-1]
	drift := float64(final)/float64(full) - 1
	peak := slices.Max(disk[retentionDays:])
	peakGrowth := float64(peak)/float64(full) - 1
	mib := make([]string, days)
	for i, v := range disk {
		mib[i] = strconv.FormatFloat(float64(v)/(1<<20), 'f', 2, 64)
	}
	b.Logf("%s, %d requests an hour for %d days, retention %d days, written and swept in %s (sweeps %s, %d records deleted); disk by day (MiB): %s",
		shape, shape.perHour(), days, retentionDays, time.Since(began).Round(time.Millisecond), sweeping.Round(time.Millisecond), swept, strings.Join(mib, " "))
	b.ReportMetric(float64(disk[retentionDays-1])/(1<<20), fmt.Sprintf("day%d-MiB", retentionDays))
	b.ReportMetric(float64(full)/(1<<20), fmt.Sprintf("day%d-MiB", retentionDays+1))
	b.ReportMetric(float64(final)/(1<<20), fmt.Sprintf("day%d-MiB", days))
	b.ReportMetric(float64(peak)/(1<<20), "peak-after-MiB")
	b.ReportMetric(100*peakGrowth, "peak-growth-%")
	b.ReportMetric(100*drift, "drift-%")
	b.ReportMetric(float64(disk[retentionDays-1])/float64(int64(retentionDays*24)*shape.perHour()), "B/request-full")
	b.ReportMetric(float64(peak)/float64(liveHours*shape.perHour()), "peak-B/live-request")
	b.ReportMetric(0, "ns/op")
	if days >= 2 && peakGrowth > steadyGrowth {
		b.Errorf("the disk's peak over days %d-%d is %d bytes, %.1f%% above day %d's %d: not level within %.0f%%",
			retentionDays+1, days, peak, 100*peakGrowth, retentionDays+1, full, 100*steadyGrowth)
	}
	return disk
}
