package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// recordingSink takes batches on up to inFlight goroutines at once and
// keeps the auditIDs it was sent. Its Send for batch number block waits
// until unblock is closed.
type recordingSink struct {
	prefilter *auditjson.Prefilter
	inFlight  int
	// failAt makes the batch of that number (from 1) fail.
	failAt int

	mu      sync.Mutex
	ids     []string
	batches []int
	sends   int
	// concurrent is closed once two Sends have run at the same time.
	running    int
	concurrent chan struct{}
}

func (s *recordingSink) options() ReplayOptions {
	return ReplayOptions{Prefilter: s.prefilter, InFlight: s.inFlight}
}

var errSinkDown = errors.New("the sink is down")

func (s *recordingSink) Send(ctx context.Context, events []classify.Event, raw [][]byte) (classify.Summary, error) {
	s.mu.Lock()
	s.sends++
	n := s.sends
	s.running++
	if s.running == 2 {
		close(s.concurrent)
	}
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.running--; s.mu.Unlock() }()
	if n == 1 && s.inFlight > 1 {
		// The first batch is held until a second one is taken: replay
		// must not wait for one commit before handing over the next.
		select {
		case <-s.concurrent:
		case <-ctx.Done():
			return classify.Summary{}, ctx.Err()
		}
	}
	if n == s.failAt {
		return classify.Summary{}, errSinkDown
	}
	if len(events) != len(raw) {
		return classify.Summary{}, errors.New("events and raw lines differ in number")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range events {
		s.ids = append(s.ids, e.ID)
	}
	s.batches = append(s.batches, len(events))
	return classify.Summary{Counted: len(events)}, nil
}

// replayLog writes n generated events, with an invalid line in place of
// those at the given 1-based line numbers, and returns its path and the
// auditIDs of the deprecated events.
func replayLog(t *testing.T, gen auditgen.Options, n int, invalidAt ...int) (string, []string) {
	t.Helper()
	var b []byte
	var want []string
	for i := range n {
		if slices.Contains(invalidAt, i+1) {
			b = append(b, `{"kind":"Event","stage":12}`+"\n"...)
			continue
		}
		line := gen.Append(nil, i)
		if gen.Deprecated(i) {
			ev, err := auditjson.DecodeEvent(line)
			require.NoError(t, err)
			want = append(want, ev.ID)
		}
		b = append(append(b, line...), '\n')
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path, want
}

// TestReplayInParallelReadsAsOneGoroutineWould: a log of several chunks is
// scanned on several goroutines and sent in batches on several at once,
// and the summary, the invalid lines named and the events sent are exactly
// those of reading it line by line: every deprecated event once, the
// first five invalid lines in file order.
func TestReplayInParallelReadsAsOneGoroutineWould(t *testing.T) {
	gen := auditgen.Options{Prefix: "pipeline", DeprecatedEvery: 3, At: time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)}
	const lines = 6000 // about 7 MB: 14 chunks
	invalid := []int{2, 900, 2500, 4001, 5000, 5999}
	path, want := replayLog(t, gen, lines, invalid...)
	agg := aggregate.New(aggregate.Options{Logger: zerolog.Nop()})
	sink := &recordingSink{prefilter: auditjson.NewPrefilter(agg.Interest()), inFlight: 4, concurrent: make(chan struct{})}

	prog := &Progress{}
	sum, err := Replay(context.Background(), []Input{{Name: path}}, nil, sink, prog, sink.options())
	require.NoError(t, err)

	// Every third line is deprecated; line 2500 was one.
	require.Len(t, want, lines/3-1)
	require.Len(t, sink.ids, len(want))
	require.ElementsMatch(t, want, sink.ids, "every deprecated event, once")
	require.Equal(t, int64(len(want)), sum.Counted)
	require.Equal(t, int64(lines-len(invalid)), sum.Events)
	require.Equal(t, int64(lines-len(invalid)), prog.Events.Load())
	require.Equal(t, int64(lines-len(invalid)-len(want)), sum.Skipped, "the rest set aside by the prefilter")
	require.Equal(t, int64(len(invalid)), sum.Invalid)
	var named []int
	for _, ex := range sum.Examples {
		named = append(named, ex.Line)
		require.Equal(t, path, ex.Input)
	}
	require.Equal(t, invalid[:maxReportedInvalid], named, "the first five invalid lines, in file order")
	for _, n := range sink.batches {
		require.LessOrEqual(t, n, DefaultBatchSize)
	}
}

// TestReplayStopsAtTheFirstSinkError: a failed batch stops the replay with
// its error, and what the sink took before it stays counted.
func TestReplayStopsAtTheFirstSinkError(t *testing.T) {
	gen := auditgen.Options{Prefix: "pipeline-error", DeprecatedEvery: 1, At: time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)}
	path, _ := replayLog(t, gen, 3000)
	sink := &recordingSink{inFlight: 1, failAt: 3, concurrent: make(chan struct{})}
	sum, err := Replay(context.Background(), []Input{{Name: path}}, nil, sink, nil, sink.options())
	require.ErrorIs(t, err, errSinkDown)
	require.Equal(t, []int{DefaultBatchSize, DefaultBatchSize}, sink.batches, "two batches before the failed third, none after")
	require.Equal(t, int64(2*DefaultBatchSize), sum.Counted)
}
