package file

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/ingesttest"
)

// A failing commit is retried from the last committed line: the follower
// neither stops nor skips.
func TestFollowRetriesFailedCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	appendEvents(t, path, 0, 3)
	ing := &ingesttest.Flaky{Failures: 2}
	f := NewFollower(FollowOptions{Path: path, Node: "n", Ingester: ing, Cursors: ing, Logger: zerolog.Nop(),
		Poll: 5 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	want := []string{"ev-0", "ev-1", "ev-2"}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(ing.Accepted()) < 3; time.Sleep(5 * time.Millisecond) {
	}
	require.Equal(t, want, ing.Accepted())
	appendEvents(t, path, 3, 1)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(ing.Accepted()) < 4; time.Sleep(5 * time.Millisecond) {
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, append(want, "ev-3"), ing.Accepted(), "each line committed exactly once after the failures")
}
