package file

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/store"
)

// flakyIngester is a hand fake of CursorIngester whose first commits fail,
// as on a full disk; it keeps the IDs and cursors it accepted.
type flakyIngester struct {
	mu       sync.Mutex
	failures int
	ids      []string
	cursors  map[string][]byte
}

func (f *flakyIngester) IngestAt(_ context.Context, _ aggregate.Origin, events []aggregate.Event, cursors ...store.Cursor) (aggregate.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		f.failures--
		return aggregate.Summary{}, errors.New("no space left on device")
	}
	for _, e := range events {
		f.ids = append(f.ids, e.ID)
	}
	for _, c := range cursors {
		f.cursors[c.Name] = c.Value
	}
	return aggregate.Summary{Counted: len(events)}, nil
}

func (f *flakyIngester) CountInvalid(string, int) {}

func (f *flakyIngester) Cursor(name string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.cursors[name]
	return v, ok, nil
}

func (f *flakyIngester) accepted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

// A failing commit is retried from the last committed line: the follower
// neither stops nor skips.
func TestFollowRetriesFailedCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	appendEvents(t, path, 0, 3)
	ing := &flakyIngester{failures: 2, cursors: map[string][]byte{}}
	f := NewFollower(FollowOptions{Path: path, Node: "n", Ingester: ing, Cursors: ing, Logger: zerolog.Nop(),
		Poll: 5 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	want := []string{"ev-0", "ev-1", "ev-2"}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(ing.accepted()) < 3; time.Sleep(5 * time.Millisecond) {
	}
	require.Equal(t, want, ing.accepted())
	appendEvents(t, path, 3, 1)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(ing.accepted()) < 4; time.Sleep(5 * time.Millisecond) {
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, append(want, "ev-3"), ing.accepted(), "each line committed exactly once after the failures")
}
