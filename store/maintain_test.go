package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// nextWeek is an hour a week ahead. Badger hides records that its own,
// real clock says have expired; the store's clock runs ahead of it, so that
// Sweep finds them.
var nextWeek = time.Now().UTC().Truncate(time.Hour).Add(7 * 24 * time.Hour)

// clock is a settable clock for the store.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// keysByKind counts the live keys of each record kind, as badger serves
// them by its own clock. The schema record, one per directory, is left
// out.
func keysByKind(t *testing.T, s *Store) map[byte]int {
	t.Helper()
	out := map[byte]int{}
	require.NoError(t, s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key()[0]; k != prefixSchema {
				out[k]++
			}
		}
		return nil
	}))
	return out
}

// hourOfLoad counts perHour requests in hour h: each a new request ID, over
// series distinct (API, node, user) series.
func hourOfLoad(t *testing.T, s *Store, h time.Time, perHour, series int) {
	t.Helper()
	reqs := make([]Request, 0, perHour)
	for i := 0; i < perHour; i++ {
		k := i % series
		// Shaped like classify.RequestID of kube-apiserver's events:
		// the received time, then a 36-byte UUID.
		id := timedID(h.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("%08x-0000-4000-8000-%012x", h.Unix()/3600, i))
		reqs = append(reqs, Request{ID: id, Key: countkey.CountKey{
			Cluster: "c",
			API:     fmt.Sprintf("a%d.v1", k%20),
			Cell: countkey.Cell{Hour: h, Node: fmt.Sprintf("n%d", k/20%5), Username: fmt.Sprintf("user-%d", k/100),
				UserAgent: "kubectl/v1.32.4", Verb: "get"},
		}})
	}
	for start := 0; start < len(reqs); start += 400 {
		_, err := s.Apply(reqs[start:min(start+400, len(reqs))])
		require.NoError(t, err)
	}
}

// Sweep deletes exactly the records of expired hours; the live ones stay.
func TestSweepDeletesExpiredHours(t *testing.T) {
	c := &clock{t: nextWeek.Add(30 * time.Minute)}
	s, err := Open(Options{Dir: t.TempDir(), Retention: 24 * time.Hour, Logger: zerolog.Nop(), Now: c.now})
	require.NoError(t, err)
	defer s.Close()
	// Four hours of 300 requests over 100 series: 20 APIs, 100 count
	// keys per hour.
	for h := 0; h < 4; h++ {
		c.t = nextWeek.Add(time.Duration(h)*time.Hour + 30*time.Minute)
		hourOfLoad(t, s, nextWeek.Add(time.Duration(h)*time.Hour), 300, 100)
	}
	_, err = s.Apply(nil, countkey.Cursor{Name: "file:/var/log/audit.log", Value: []byte("{}")})
	require.NoError(t, err)
	// One segment of marks per hour: each hour's 300 are one commit.
	require.Equal(t, map[byte]int{prefixCount: 400, prefixMarkSegment: 4, prefixMeta: 20, prefixCursor: 1}, keysByKind(t, s))

	n, err := s.Sweep()
	require.NoError(t, err)
	require.Equal(t, 0, n, "nothing has expired")

	// Hour 19 expires at 19:00 + 24h + 1h, hour 20 an hour later.
	c.t = nextWeek.Add(26 * time.Hour)
	n, err = s.Sweep()
	require.NoError(t, err)
	require.Equal(t, 2*(100+1), n, "the counts and segments of two hours")
	require.Equal(t, uint64(202), s.Swept())
	require.Equal(t, map[byte]int{prefixCount: 200, prefixMarkSegment: 2, prefixMeta: 20, prefixCursor: 1}, keysByKind(t, s))
	require.Len(t, s.APIs(), 20)

	c.t = nextWeek.Add(28 * time.Hour)
	n, err = s.Sweep()
	require.NoError(t, err)
	require.Equal(t, 2*(100+1)+20, n, "the last two hours, and the APIs' metadata")
	require.Equal(t, map[byte]int{prefixCursor: 1}, keysByKind(t, s), "input positions never expire")
	require.Empty(t, s.APIs())
}

// diskUsage is the space the directory's files take on disk: allocated
// blocks, so that badger's sparse, preallocated logs count for what they
// hold.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var sum int64
	for _, e := range entries {
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(filepath.Join(dir, e.Name()), &st))
		sum += st.Blocks * 512
	}
	return sum
}

// At a steady load, disk usage levels off once hours start to expire:
// a bounded run of three retention periods of simulated time (24 h
// retention), 20,000 requests an hour over 1,000 series, with the
// maintenance Sunset runs once an hour. It takes about 40 s, so it runs
// only when SUNSET_PLATEAU_HOURS sets the simulated hours (make
// test-plateau: 72).
func TestDiskUsagePlateausAtSteadyLoad(t *testing.T) {
	const (
		retention = 24 * time.Hour
		perHour   = 20000
		series    = 1000
	)
	hours, err := strconv.Atoi(os.Getenv("SUNSET_PLATEAU_HOURS"))
	if err != nil || hours < 3*24 {
		t.Skip("set SUNSET_PLATEAU_HOURS to 72 or more (make test-plateau): writes 20,000 requests per simulated hour")
	}
	dir := t.TempDir()
	c := &clock{t: nextWeek}
	s, err := Open(Options{Dir: dir, Retention: retention, Logger: zerolog.Nop(), Now: c.now})
	require.NoError(t, err)
	defer s.Close()
	usage := make([]int64, hours)
	for h := 0; h < hours; h++ {
		hour := nextWeek.Add(time.Duration(h) * time.Hour)
		c.t = hour.Add(59 * time.Minute)
		hourOfLoad(t, s, hour, perHour, series)
		_, err := s.Sweep()
		require.NoError(t, err)
		require.NoError(t, s.CollectGarbage())
		usage[h] = diskUsage(t, dir)
	}
	// The hours not yet expired at the last one's end: retention + 1h
	// after each hour's start, so 25 of them.
	live := 25
	// 20,000 requests an hour, 400 a commit: 50 segments an hour.
	require.Equal(t, map[byte]int{prefixCount: live * series, prefixMarkSegment: live * perHour / 400, prefixMeta: 20}, keysByKind(t, s))

	day := 24
	peak := func(from, to int) int64 { return slices.Max(usage[from:to]) }
	t.Logf("disk usage by hour (MiB): %v", mibs(usage))
	t.Logf("plateau for %d live hours of %d series and %d requests/hour: peak %.1f MiB in the second day, %.1f MiB in the last",
		live, series, perHour, float64(peak(day, 2*day))/(1<<20), float64(peak(hours-day, hours))/(1<<20))
	require.LessOrEqual(t, peak(hours-day, hours), peak(day, 2*day)*6/5,
		"the last day's peak is within 20%% of the second day's")
}

func mibs(b []int64) []string {
	out := make([]string, len(b))
	for i, v := range b {
		out[i] = strconv.FormatFloat(float64(v)/(1<<20), 'f', 1, 64)
	}
	return out
}

// An hour whose expired keys overfill one badger transaction before
// sweepChunk of them are read (one API's clients, each with a long user
// agent, lie side by side) is still swept whole, over several commits;
// it used to fail with ErrTxnTooBig at every sweep and block the rest.
func TestSweepDeletesMoreThanOneTransactionHolds(t *testing.T) {
	c := &clock{t: nextWeek.Add(30 * time.Minute)}
	s, err := Open(Options{Dir: t.TempDir(), Retention: 24 * time.Hour, Logger: zerolog.Nop(), Now: c.now})
	require.NoError(t, err)
	defer s.Close()
	agent := strings.Repeat("a", 200)
	var reqs []Request
	for node := range 5 {
		for _, verb := range []string{"get", "list", "watch", "update"} {
			for user := range 400 {
				reqs = append(reqs, Request{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", len(reqs), user), Key: countkey.CountKey{
					Cluster: "c", API: "a.v1",
					Cell: countkey.Cell{Hour: nextWeek, Node: fmt.Sprintf("n%d", node), Username: fmt.Sprintf("user-%03d-%s", user, strings.Repeat("u", 100)),
						UserAgent: agent, Verb: verb},
				}})
			}
		}
	}
	for start := 0; start < len(reqs); start += 400 {
		_, err := s.Apply(reqs[start:min(start+400, len(reqs))])
		require.NoError(t, err)
	}
	keys := 0
	for _, n := range keysByKind(t, s) {
		keys += n
	}
	require.Greater(t, keys, sweepChunk/2, "the hour's counts, marks and metadata")

	c.t = nextWeek.Add(26 * time.Hour)
	n, err := s.Sweep()
	require.NoError(t, err)
	require.Equal(t, keys, n, "every record of the hour")
	require.Empty(t, keysByKind(t, s))
}

func TestMaintainCompactsOnceADayAfterASweepDeletes(t *testing.T) {
	day := nextWeek.Truncate(24 * time.Hour).Add(24 * time.Hour)
	c := &clock{t: day.Add(time.Minute)}
	s, err := Open(Options{Dir: t.TempDir(), Retention: time.Hour, Logger: zerolog.Nop(), Now: c.now})
	require.NoError(t, err)
	defer s.Close()
	var m maintenance

	hourOfLoad(t, s, day, 400, 10)
	s.maintain(&m)
	require.Equal(t, uint64(0), s.Compactions(), "nothing expired, so nothing to compact")

	// The first hour expires an hour after its end.
	c.t = day.Add(2*time.Hour + time.Minute)
	hourOfLoad(t, s, day.Add(2*time.Hour), 400, 10)
	s.maintain(&m)
	require.Equal(t, uint64(1), s.Compactions(), "a sweep deleted the first hour")

	c.t = day.Add(4*time.Hour + time.Minute)
	s.maintain(&m)
	require.Equal(t, uint64(1), s.Compactions(), "the same day: swept, not compacted again")

	c.t = day.Add(24*time.Hour + time.Minute)
	s.maintain(&m)
	require.Equal(t, uint64(2), s.Compactions(), "a new day, and the second load was swept in the day before")

	c.t = day.Add(48*time.Hour + time.Minute)
	s.maintain(&m)
	require.Equal(t, uint64(2), s.Compactions(), "nothing swept since the last compaction")
	require.Empty(t, keysByKind(t, s))
	// Each load wrote 10 count keys and 1 segment of marks, both loads
	// the same 10 APIs' metadata: 11 records swept, then 21.
	require.Equal(t, uint64(32), s.Swept())
}
