package file

import (
	"bytes"
	"compress/gzip"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// auditLine is one audit event that counts, without its newline.
func auditLine(id string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `","stage":"ResponseComplete","verb":"get","user":{"username":"u"},"objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-21T19:30:00Z","annotations":{"k8s.io/deprecated":"true"}}`
}

// reasonsIngester is a Flaky that never fails and keeps the reasons of the
// lines it was told were not audit events.
type reasonsIngester struct {
	*ingesttest.Flaky
	mu      sync.Mutex
	reasons map[string]int
}

func (r *reasonsIngester) CountDecodeError(_, reason string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reasons == nil {
		r.reasons = map[string]int{}
	}
	r.reasons[reason] += n
}

func (r *reasonsIngester) Reasons() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.reasons)
}

// idSink keeps the IDs of the events replay sends it.
type idSink struct{ ids []string }

func (s *idSink) Send(_ context.Context, events []classify.Event, _ [][]byte) (classify.Summary, error) {
	for _, e := range events {
		s.ids = append(s.ids, e.ID)
	}
	return classify.Summary{Counted: len(events)}, nil
}

// replayed is what replay made of an input: the IDs of its events and the
// reasons of its invalid lines.
func replayed(t *testing.T, in Input) ([]string, map[string]int, Summary) {
	t.Helper()
	sink := &idSink{}
	sum, err := Replay(context.Background(), []Input{in}, nil, sink, nil, ReplayOptions{})
	require.NoError(t, err)
	reasons := map[string]int{}
	for _, l := range sum.Examples {
		reasons[l.Reason]++
	}
	require.Equal(t, sum.Invalid, int64(len(sum.Examples)))
	return sink.ids, reasons, sum
}

// Replay and follow read lines with one reader and judge them alike: on the
// same bytes (a blank line, a CRLF line with spaces around it, a line over
// MaxLineBytes, a line that is not JSON, and a last line without a
// newline) they count the same events and skip the same lines for the
// same reasons. The one difference is the README's: replay takes a last
// line without a newline as it is, since the file is complete, while
// follow waits until the writer finishes it, and then counts it too. A
// gzip copy of the file replays the same.
func TestReplayAndFollowReadLinesAlike(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "audit.log")
		f, err := os.Create(path)
		require.NoError(t, err)
		var gz bytes.Buffer
		zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
		require.NoError(t, err)
		write := func(s string) {
			t.Helper()
			_, err := f.WriteString(s)
			require.NoError(t, err)
			_, err = zw.Write([]byte(s))
			require.NoError(t, err)
		}
		write(auditLine("ev-0") + "\n\n")
		write("  " + auditLine("ev-1") + " \r\n")
		// One byte over the limit, written in pieces so the test holds no
		// copy of it.
		head := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"huge","stage":"ResponseComplete","userAgent":"`
		write(head)
		mib := strings.Repeat("x", 1<<20)
		rest := MaxLineBytes + 1 - len(head) - len(`"}`)
		for ; rest >= len(mib); rest -= len(mib) {
			write(mib)
		}
		write(mib[:rest] + `"}` + "\n")
		write("this is not JSON\r\n")
		write(auditLine("ev-2") + "\n")
		write(auditLine("ev-3")) // no newline: the writer is not done
		require.NoError(t, zw.Close())
		fi, err := f.Stat()
		require.NoError(t, err)
		require.Greater(t, fi.Size(), int64(MaxLineBytes))

		wantIDs := []string{"ev-0", "ev-1", "ev-2", "ev-3"}
		wantReasons := map[string]int{string(ReasonLineTooLong): 1, "malformed_json": 1}
		ids, reasons, sum := replayed(t, Input{Name: path})
		require.Equal(t, wantIDs, ids, "replay counts the last line without a newline: the file is complete")
		require.Equal(t, wantReasons, reasons)
		require.Equal(t, []int{4, 5}, []int{sum.Examples[0].Line, sum.Examples[1].Line}, "blank lines are numbered")

		rotated := filepath.Join(dir, "audit-rotated.log")
		require.NoError(t, os.WriteFile(rotated, gz.Bytes(), 0o600))
		ids, reasons, _ = replayed(t, Input{Name: rotated})
		require.Equal(t, wantIDs, ids, "a gzip copy replays the same")
		require.Equal(t, wantReasons, reasons)

		ing := &reasonsIngester{Flaky: &ingesttest.Flaky{}}
		fol := NewFollower(FollowOptions{Path: path, Node: "n", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop(), Poll: 5 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- fol.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, wantIDs[:3], ing.Accepted(), "follow waits for the writer to finish the last line")
		require.Equal(t, wantReasons, ing.Reasons())

		// The writer finishes the line: now follow has counted what replay
		// did, and replay still counts the same.
		_, err = f.WriteString("\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, wantIDs, ing.Accepted())
		require.Equal(t, wantReasons, ing.Reasons())
		require.Equal(t, int64(7), fol.Lines.Load(), "every line, blank ones included, read once")
		ids, reasons, _ = replayed(t, Input{Name: path})
		require.Equal(t, wantIDs, ids)
		require.Equal(t, wantReasons, reasons)

		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
}
