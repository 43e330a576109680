package file

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// A failing commit is retried from the last committed line: the follower
// neither stops nor skips. The follower runs on synctest's clock, so a
// second of following takes no time, and synctest.Wait tells when it has
// done all it will: what it committed then is final, not a guess after a
// pause.
func TestFollowRetriesFailedCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.log")
		appendEvents(t, path, 0, 3)
		ing := &ingesttest.Flaky{Failures: 2}
		f := NewFollower(FollowOptions{Path: path, Node: "n", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop(),
			Poll: 5 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.Run(ctx) }()

		// Two failures pause 5 and 10 ms; a second is two hundred polls
		// past them.
		time.Sleep(time.Second)
		synctest.Wait()
		want := []string{"ev-0", "ev-1", "ev-2"}
		require.Equal(t, want, ing.Accepted())
		require.Equal(t, int64(9), f.Lines.Load(), "3 lines read three times: twice failed, once committed")

		appendEvents(t, path, 3, 1)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, append(want, "ev-3"), ing.Accepted(), "each line committed exactly once after the failures")
		require.Equal(t, int64(10), f.Lines.Load(), "the new line read once")
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
}
