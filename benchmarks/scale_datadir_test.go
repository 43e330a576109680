package benchmarks

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/store"
)

// scaleFills keeps each step's filled data directory for the whole test
// binary, as the query benchmarks keep their corpus: with -count 3 each
// step is measured three times over one fill. TestMain removes them.
var scaleFills struct {
	mu      sync.Mutex
	root    string
	byShape map[scaleShape]*scaleFill
}

func TestMain(m *testing.M) {
	code := m.Run()
	if scaleFills.root != "" {
		_ = os.RemoveAll(scaleFills.root)
	}
	os.Exit(code)
}

// scaleFill is a step's data directory, closed.
type scaleFill struct {
	dir         string
	shape       scaleShape
	first, last time.Time // the hours written
	requests    int64
	seriesHours int64
	took        time.Duration
	disk        int64 // bytes of the directory's files after a close
}

// storeCaps raises the store's caps so that a step keeps every client,
// apiserver and cluster it sends, as its shape says: past the defaults
// (500 clients per API, apiserver and hour; 64 apiservers; 1,000
// clusters) the store would fold the rest into "other".
func storeCaps(shape scaleShape) (clients, nodes, clusters int) {
	return max(store.DefaultMaxClients, 2*shape.Users), max(store.DefaultMaxNodes, shape.Nodes), max(store.DefaultMaxClusters, shape.Clusters)
}

func openScaleStore(dir string, shape scaleShape, retention time.Duration, now func() time.Time) (*store.Store, error) {
	clients, nodes, clusters := storeCaps(shape)
	return store.Open(store.Options{Dir: dir, NoSync: true, Logger: zerolog.Nop(), Retention: retention, Now: now,
		MaxClients: clients, MaxNodes: nodes, MaxClusters: clusters, Merge: aggregate.StoreMerge()})
}

// fillStep writes shape's history, ending with the current hour, into a
// data directory of its own, once per test binary.
func fillStep(b *testing.B, shape scaleShape) *scaleFill {
	b.Helper()
	scaleFills.mu.Lock()
	defer scaleFills.mu.Unlock()
	if f := scaleFills.byShape[shape]; f != nil {
		return f
	}
	if scaleFills.root == "" {
		root, err := os.MkdirTemp("", "sunset-scale-")
		if err != nil {
			b.Fatal(err)
		}
		scaleFills.root, scaleFills.byShape = root, map[scaleShape]*scaleFill{}
	}
	dir, err := os.MkdirTemp(scaleFills.root, "step-")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	s, err := openScaleStore(dir, shape, scaleRetention, nil)
	if err != nil {
		b.Fatal(err)
	}
	last := start.UTC().Truncate(time.Hour)
	first := last.Add(-time.Duration(shape.Days*24-1) * time.Hour)
	w := newHourWriter(s, shape, 16384)
	for h := first; !h.After(last); h = h.Add(time.Hour) {
		if err := w.hour(h, h.Hour() == last.Hour()); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	f := &scaleFill{dir: dir, shape: shape, first: first, last: last, requests: w.requests,
		seriesHours: shape.seriesPerHour() * int64(shape.Days*24), took: time.Since(start)}
	if want := shape.perHour() * int64(shape.Days*24); f.requests != want {
		b.Fatalf("the fill wrote %d requests; %s is %d", f.requests, shape, want)
	}
	f.disk = dirSize(b, dir)
	scaleFills.byShape[shape] = f
	return f
}

// dirSize sums the sizes of the files under dir.
func dirSize(b *testing.B, dir string) int64 {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return size
}

// mainRequests is what the fill holds for the busy API in the hours from
// from to to that are still kept at now: what a query at now must count.
func (f *scaleFill) mainRequests(from, to, now time.Time) int64 {
	hours := int64(0)
	for h := f.first; !h.After(f.last); h = h.Add(time.Hour) {
		// The store keeps an hour for the retention period after its end.
		if !h.Before(from) && !h.After(to) && h.Add(scaleRetention+time.Hour).After(now) {
			hours++
		}
	}
	return hours * f.shape.mainPerNodeHour() * int64(f.shape.Nodes*f.shape.Clusters)
}
