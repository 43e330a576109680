package file

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// Newest reads every input and returns the time of its newest event (its
// requestReceivedTimestamp, else its stageTimestamp, the time it is counted
// by), or the zero time if no event has one. Invalid lines are passed over,
// as Replay passes over them.
func Newest(ctx context.Context, inputs []Input, stdin io.Reader, prog *Progress) (time.Time, error) {
	var s newestSink
	_, err := Replay(ctx, inputs, stdin, &s, prog, ReplayOptions{})
	return s.newest, err
}

type newestSink struct{ newest time.Time }

func (s *newestSink) Send(_ context.Context, events []classify.Event, _ [][]byte) (classify.Summary, error) {
	for _, e := range events {
		t := e.RequestReceived
		if t.IsZero() {
			t = e.StageTime
		}
		if t.After(s.newest) {
			s.newest = t
		}
	}
	return classify.Summary{}, nil
}

// ShiftToHour is how far to move events whose newest is at newest so that
// it falls in the hour of now: whole hours, so that every event keeps its
// minute and each hour's count stays what it was. Events may then lie up to
// an hour after now, within the current hour. Zero when newest is zero.
func ShiftToHour(newest, now time.Time) time.Duration {
	if newest.IsZero() {
		return 0
	}
	return now.UTC().Truncate(time.Hour).Sub(newest.UTC().Truncate(time.Hour))
}

// Shifted is a Sink that moves every event by By, its decoded times and its
// raw line alike (see auditjson.Shift), before handing it to Sink.
// Identities stay, so shifted events deduplicate against unshifted ones.
type Shifted struct {
	Sink Sink
	By   time.Duration
}

// Send implements Sink.
func (s Shifted) Send(ctx context.Context, events []classify.Event, raw [][]byte) (classify.Summary, error) {
	if s.By == 0 {
		return s.Sink.Send(ctx, events, raw)
	}
	for i := range events {
		e := &events[i]
		if e.IdentityTime.IsZero() {
			// The request stays the one it was (classify.RequestID).
			e.IdentityTime = e.RequestReceived
		}
		if !e.RequestReceived.IsZero() {
			e.RequestReceived = e.RequestReceived.Add(s.By)
		}
		if !e.StageTime.IsZero() {
			e.StageTime = e.StageTime.Add(s.By)
		}
		shifted, err := auditjson.Shift(raw[i], s.By)
		if err != nil {
			// Replay only passes events that decoded, so this is a bug.
			return classify.Summary{}, err
		}
		raw[i] = shifted
	}
	return s.Sink.Send(ctx, events, raw)
}

// SpoolStdin copies standard input to a temporary file when an input
// reads it, so that it can be read twice (Newest, then Replay): each call
// of open gives a reader from its start. cleanup removes the file. Without
// such an input, open gives stdin itself.
func SpoolStdin(inputs []Input, stdin io.Reader) (open func() (io.ReadCloser, error), cleanup func(), err error) {
	if !slices.ContainsFunc(inputs, func(in Input) bool { return in.Name == Stdin }) {
		return func() (io.ReadCloser, error) { return io.NopCloser(stdin), nil }, func() {}, nil
	}
	f, err := os.CreateTemp("", "sunset-stdin-*.log")
	if err != nil {
		return nil, nil, fmt.Errorf("keeping standard input to read it twice: %w", err)
	}
	_, err = io.Copy(f, stdin)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	name := f.Name()
	cleanup = func() { _ = os.Remove(name) }
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("keeping standard input to read it twice: %w", err)
	}
	open = func() (io.ReadCloser, error) { return os.Open(name) }
	return open, cleanup, nil
}
