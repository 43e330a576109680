// Package ingesttest holds a hand fake of the small ingester interfaces
// that ingest packages declare (IngestAt, CountInvalid, CountDecodeError, Cursor), for tests
// of how they handle failed commits, an aggregator over a real store
// (Counter) for tests of what they commit, and events of hostile lengths
// with the bounds every decoder must hold them to (HostileEvents,
// CheckBounds).
package ingesttest

import (
	"context"
	"errors"
	"sync"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// Flaky fails its first Failures commits, as on a full disk, then keeps
// the event IDs and cursors it accepts.
type Flaky struct {
	mu       sync.Mutex
	Failures int
	ids      []string
	cursors  map[string][]byte
}

// IngestAt implements the ingest packages' ingester interfaces.
func (f *Flaky) IngestAt(_ context.Context, _ classify.Origin, events []classify.Event, cursors ...countkey.Cursor) (classify.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Failures > 0 {
		f.Failures--
		return classify.Summary{}, errors.New("no space left on device")
	}
	for _, e := range events {
		f.ids = append(f.ids, e.ID)
	}
	if f.cursors == nil {
		f.cursors = map[string][]byte{}
	}
	for _, c := range cursors {
		f.cursors[c.Name] = c.Value
	}
	return classify.Summary{Counted: len(events)}, nil
}

// CountInvalid implements the ingester interfaces; it records nothing.
func (f *Flaky) CountInvalid(string, int) {}

// CountDecodeError implements the ingester interfaces; it records nothing.
func (f *Flaky) CountDecodeError(string, string, int) {}

// CountPrefiltered implements the ingester interfaces; it records nothing.
func (f *Flaky) CountPrefiltered(string, classify.Prefiltered) {}

// HeardReads implements sink.Tallies, for fakes that embed Flaky and
// record a tally of their own; it records nothing.
func (f *Flaky) HeardReads(string, bool) {}

// Cursor returns a cursor accepted earlier.
func (f *Flaky) Cursor(name string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.cursors[name]
	return v, ok, nil
}

// Accepted returns the IDs of the events accepted so far, in order.
func (f *Flaky) Accepted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}
