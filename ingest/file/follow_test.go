package file

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

var followNow = ingesttest.CapturedNow

type followEnv struct {
	t    *testing.T
	c    *ingesttest.Counter
	path string
	// committed is the offset of the running follower's last commit, -1
	// before its first.
	committed atomic.Int64
	// commits receives a token after each commit, without waiting.
	commits chan struct{}
}

func newFollowEnv(t *testing.T, dataDir string) *followEnv {
	t.Helper()
	return &followEnv{t: t, c: ingesttest.NewCounter(t, dataDir, func() time.Time { return followNow }, nil), commits: make(chan struct{}, 1)}
}

// start runs a follower of path until the returned stop is called.
func (e *followEnv) start(path string) (*Follower, func()) {
	e.path = path
	e.committed.Store(-1)
	f := NewFollower(FollowOptions{Path: path, Cluster: "c", Node: "n", Ingester: e.c, Tallies: e.c, Cursors: e.c, Logger: zerolog.Nop(), Poll: 5 * time.Millisecond,
		OnCommit: func(offset int64) {
			e.committed.Store(offset)
			select {
			case e.commits <- struct{}{}:
			default:
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	return f, func() {
		cancel()
		require.ErrorIs(e.t, <-done, context.Canceled)
	}
}

// total is the number of counted requests in the store.
func (e *followEnv) total() uint64 {
	n, err := e.c.Requests("c", "endpoints.v1", followNow.Add(-time.Hour), followNow)
	require.NoError(e.t, err)
	return n
}

// waitFor waits until the follower has committed every complete line of
// the file it follows, and then requires that the store holds want
// requests: with nothing left to read, nothing more can arrive.
func (e *followEnv) waitFor(want uint64) {
	e.t.Helper()
	atEnd := func() bool { return e.committed.Load() == completeLines(e.t, e.path) }
	timeout := time.After(10 * time.Second)
wait:
	for !atEnd() {
		select {
		case <-e.commits:
		case <-timeout:
			break wait
		}
	}
	require.True(e.t, atEnd(), "the follower committed up to %d, the file's complete lines end at %d", e.committed.Load(), completeLines(e.t, e.path))
	require.Equal(e.t, want, e.total())
}

// completeLines is the offset just past the last complete line of path.
func completeLines(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return int64(bytes.LastIndexByte(b, '\n') + 1)
}

func appendEvents(t *testing.T, path string, from, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer f.Close()
	for i := from; i < from+n; i++ {
		_, err := fmt.Fprintf(f, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"ev-%d","stage":"ResponseComplete","verb":"get","user":{"username":"u"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-21T19:30:00Z","annotations":{"k8s.io/deprecated":"true"}}`+"\n", i)
		require.NoError(t, err)
	}
}

func TestFollowRenameRotation(t *testing.T) {
	e := newFollowEnv(t, t.TempDir())
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	_, stop := e.start(path) // before the file exists
	defer stop()
	appendEvents(t, path, 0, 3)
	e.waitFor(3)
	// kube-apiserver's rotation: rename, then a new file at the path.
	require.NoError(t, os.Rename(path, filepath.Join(dir, "audit-2026-11-21T19-31-00.000.log")))
	appendEvents(t, filepath.Join(dir, "audit-2026-11-21T19-31-00.000.log"), 3, 1) // a late write to the old file
	appendEvents(t, path, 4, 2)
	e.waitFor(6)
}

func TestFollowCopyTruncate(t *testing.T) {
	e := newFollowEnv(t, t.TempDir())
	path := filepath.Join(t.TempDir(), "audit.log")
	appendEvents(t, path, 0, 4)
	_, stop := e.start(path)
	defer stop()
	e.waitFor(4)
	// logrotate copytruncate: copy away, truncate in place, keep writing.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".1", data, 0o600))
	require.NoError(t, os.Truncate(path, 0))
	// Fewer lines than before: the follower sees the file shrink whenever
	// it looks, before or after these are written.
	appendEvents(t, path, 4, 2)
	e.waitFor(6)
}

func TestFollowRestartsWhereItStopped(t *testing.T) {
	dataDir := t.TempDir()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	e := newFollowEnv(t, dataDir)
	appendEvents(t, path, 0, 5)
	f, stop := e.start(path)
	e.waitFor(5)
	stop()
	require.Equal(t, int64(5), f.Lines.Load())

	// More lines, and a partial line the writer has not finished.
	appendEvents(t, path, 5, 3)
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = fh.WriteString(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"ev-8",`)
	require.NoError(t, err)

	f, stop = e.start(path)
	e.waitFor(8)
	require.Equal(t, int64(3), f.Lines.Load(), "the restart read only the new lines: its position was committed")
	_, err = fh.WriteString(`"stage":"ResponseComplete","verb":"get","user":{"username":"u"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-21T19:30:00Z","annotations":{"k8s.io/deprecated":"true"}}` + "\n")
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	e.waitFor(9)
	stop()

	// Rotated while stopped: the tail of the old file is found by inode.
	appendEvents(t, path, 9, 2)
	require.NoError(t, os.Rename(path, filepath.Join(dir, "audit-old.log")))
	appendEvents(t, path, 11, 1)
	f, stop = e.start(path)
	defer stop()
	e.waitFor(12)
	require.Equal(t, int64(3), f.Lines.Load())
}
