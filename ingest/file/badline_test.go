package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// A followed file with a 65 MiB line and malformed lines between good ones:
// the follower skips and counts each bad line by reason, exactly as replay
// does, moves its position past them, and keeps counting what follows.
func TestFollowSkipsBadLinesLikeReplay(t *testing.T) {
	reg := prometheus.NewRegistry()
	agg := ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return followNow }, reg)

	path := filepath.Join(t.TempDir(), "audit.log")
	appendEvents(t, path, 0, 3)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	// A 65 MiB event, written in pieces so the test holds no copy of it.
	_, err = f.WriteString(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"huge","stage":"ResponseComplete","userAgent":"`)
	require.NoError(t, err)
	mib := []byte(strings.Repeat("x", 1<<20))
	for range 65 {
		_, err = f.Write(mib)
		require.NoError(t, err)
	}
	_, err = f.WriteString(`"}` + "\n" + "this is not JSON\n" + `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"no-stage"}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	appendEvents(t, path, 3, 2)

	committed := make(chan int64, 100)
	fol := NewFollower(FollowOptions{Path: path, Cluster: "c", Node: "n", Ingester: agg, Tallies: agg, Cursors: agg, Logger: zerolog.Nop(),
		Poll: 5 * time.Millisecond, OnCommit: func(off int64) { committed <- off }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fol.Run(ctx) }()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()
	waitCommitted := func() {
		t.Helper()
		fi, err := os.Stat(path)
		require.NoError(t, err)
		for {
			select {
			case off := <-committed:
				if off == fi.Size() {
					return
				}
			case <-time.After(2 * time.Minute): // a loaded machine under -race
				t.Fatalf("the follower did not commit up to the end of the file (%d bytes)", fi.Size())
			}
		}
	}
	waitCommitted()

	e := &followEnv{t: t, c: agg}
	require.Equal(t, uint64(5), e.total(), "the 3 lines before the bad ones and the 2 after are counted")
	require.Equal(t, int64(8), fol.Lines.Load())
	metrics := `
# HELP sunset_ingest_decode_errors_total Bodies and events that could not be decoded, by source and reason.
# TYPE sunset_ingest_decode_errors_total counter
sunset_ingest_decode_errors_total{reason="line_too_long",source="file"} 1
sunset_ingest_decode_errors_total{reason="malformed_json",source="file"} 1
sunset_ingest_decode_errors_total{reason="missing_stage",source="file"} 1
# HELP sunset_ingest_events_total Audit events received, by source and what became of them (counted, duplicate, skipped_stage, not_deprecated, no_object_ref, expired, future, invalid, too_long).
# TYPE sunset_ingest_events_total counter
sunset_ingest_events_total{result="counted",source="file"} %d
sunset_ingest_events_total{result="duplicate",source="file"} 0
sunset_ingest_events_total{result="invalid",source="file"} 3
`
	requireMetrics := func(counted int) {
		t.Helper()
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(metrics, counted)),
			"sunset_ingest_decode_errors_total", "sunset_ingest_events_total"))
	}
	requireMetrics(5)

	// Replay judges the same file the same way.
	sum, err := Replay(context.Background(), []Input{{Name: path}}, nil, discardSink{}, nil, ReplayOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(3), sum.Invalid)
	require.Equal(t, []InvalidLine{
		{Input: path, Line: 4, Reason: "line_too_long", Message: "line is longer than 67108864 bytes"},
		{Input: path, Line: 5, Reason: "malformed_json", Message: sum.Examples[1].Message},
		{Input: path, Line: 6, Reason: "missing_stage", Message: sum.Examples[2].Message},
	}, sum.Examples)

	// The position is past the bad lines: what comes next is counted, and
	// nothing is counted twice.
	appendEvents(t, path, 5, 2)
	waitCommitted()
	require.Equal(t, uint64(7), e.total())
	require.Equal(t, int64(10), fol.Lines.Load())
	requireMetrics(7)
}

// discardSink takes events and counts nothing.
type discardSink struct{}

func (discardSink) Send(_ context.Context, events []classify.Event, _ [][]byte) (classify.Summary, error) {
	return classify.Summary{Skipped: len(events)}, nil
}
