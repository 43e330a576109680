package file

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// replaySeeds are files to replay: captured and generated audit lines, and
// the lines a file may hold that are not plain events.
func replaySeeds(f *testing.F) [][]byte {
	lines := ingesttest.CapturedLines(f, "../../testdata")
	var out [][]byte
	for i := 0; i+3 <= len(lines); i += 3 {
		out = append(out, append(bytes.Join(lines[i:i+3], []byte("\n")), '\n'))
	}
	return append(out, mixedFile(), []byte("{\"a\":1}\n\n  {\"b\":2}  \r\n{\"last\":true}"), []byte("\n\n\n"), nil)
}

// mixedFile is 7 generated events, every third deprecated (the 1st, 4th
// and 7th), two blank lines, a line that is not JSON and an event without
// a stage, and a last line, without a newline, deprecated by an escaped
// annotation key.
func mixedFile() []byte {
	gen := auditgen.Options{Prefix: "seed", DeprecatedEvery: 3, At: ingesttest.CapturedNow.Add(-time.Hour)}
	var b []byte
	for i := range 7 {
		b = append(gen.Append(b, i), '\n')
	}
	b = append(b, "\n  \r\nnot JSON\r\n"+`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"no-stage"}`+"\n"...)
	return append(b, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"esc","stage":"ResponseComplete","verb":"get","objectRef":{"resource":"endpoints","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-21T19:30:00Z","annotations":{"k8s.io\/deprecated":"true"}}`...)
}

// chunkSize makes a fuzzed size a chunk size from 1 byte up.
func chunkSize(size uint16) int { return int(size)%4096 + 1 }

// FuzzChunksReadLikeReadLines checks replay's chunk reader against the
// line reader that follow uses, and that replay used before it read
// chunks: cut into lines, the chunks give the same lines, numbered the
// same, lines over the limit reported as too long and never kept, whatever
// the chunk size and the limit.
func FuzzChunksReadLikeReadLines(f *testing.F) {
	for _, s := range replaySeeds(f) {
		f.Add(s, uint16(1<<15), uint16(4095))
		f.Add(s, uint16(40), uint16(16))
	}
	f.Fuzz(func(t *testing.T, data []byte, limit, size uint16) {
		if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			return // read as gzip
		}
		var want []Line
		err := readLines(Input{Name: Stdin}, bytes.NewReader(data), nil, int(limit), func(l Line) error {
			l.Bytes = bytes.Clone(l.Bytes)
			want = append(want, l)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var read atomic.Int64
		r, closeInput, err := openChunks(Input{Name: Stdin}, bytes.NewReader(data), &read, int(limit), chunkSize(size))
		if err != nil {
			t.Fatal(err)
		}
		defer closeInput()
		var got []Line
		var buf []byte
		before := 0
		for {
			var tooLong, ok bool
			buf, tooLong, ok, err = r.next(buf)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if tooLong && len(buf) > 0 {
				t.Fatalf("a line over the limit was kept: %d bytes", len(buf))
			}
			c := &chunk{input: Stdin, buf: buf, tooLong: tooLong}
			n := eachLine(c, int(limit), func(l Line) {
				l.Number += before
				l.Bytes = bytes.Clone(l.Bytes)
				got = append(got, l)
			})
			if n == 0 {
				t.Fatal("a chunk without a line")
			}
			before += n
		}
		if !slices.EqualFunc(got, want, func(a, b Line) bool {
			return a.Input == b.Input && a.Number == b.Number && a.TooLong == b.TooLong && bytes.Equal(a.Bytes, b.Bytes)
		}) {
			t.Fatalf("chunks give lines %+v, want %+v", got, want)
		}
		if read.Load() != int64(len(data)) {
			t.Fatalf("%d bytes read of %d", read.Load(), len(data))
		}
	})
}

// planningSink classifies the events it is sent as Ingest would, storing
// nothing, and keeps the IDs of those that count. A duplicate counts as
// counted: which batch repeats a request is the batching's choice, not the
// pre-filter's.
type planningSink struct {
	agg       *aggregate.Aggregator
	prefilter *auditjson.Prefilter
	counted   []string
}

func (s *planningSink) Send(_ context.Context, events []classify.Event, _ [][]byte) (classify.Summary, error) {
	planned, err := s.agg.Plan(classify.Origin{Source: "file", Cluster: "c", Node: "n"}, events)
	if err != nil {
		return classify.Summary{}, err
	}
	var sum classify.Summary
	for i, p := range planned {
		r, a := p.Result, p.Admission
		if r == classify.ResultDuplicate {
			r = classify.ResultCounted
		}
		if a == classify.ResultDuplicate {
			a = classify.ResultCounted
		}
		sum.Tally(r)
		sum.TallyAdmission(a)
		if r == classify.ResultCounted {
			s.counted = append(s.counted, events[i].ID)
		}
	}
	return sum, nil
}

// lineByLine is replay as it was before chunks, the reference: one
// goroutine reads line by line, sets aside what the pre-filter may, decodes
// the rest, and sends every event in one batch.
func lineByLine(t *testing.T, data []byte, limit int, sink *planningSink) Summary {
	t.Helper()
	sum := Summary{Inputs: 1}
	var events []classify.Event
	err := readLines(Input{Name: Stdin}, bytes.NewReader(data), nil, limit, func(l Line) error {
		if !l.TooLong {
			if r, skip := sink.prefilter.Skip(l.Bytes); skip {
				sum.Events++
				sum.skipN(string(r.Result), 1)
				return nil
			}
		}
		ev, bad := DecodeLine(l)
		if bad != nil {
			sum.Invalid++
			if len(sum.Examples) < maxReportedInvalid {
				sum.Examples = append(sum.Examples, InvalidLine{Input: l.Input, Line: l.Number, Reason: string(bad.Reason), Message: bad.Message})
			}
			return nil
		}
		sum.Events++
		events = append(events, ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 {
		return sum
	}
	res, err := sink.Send(context.Background(), events, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum.Counted, sum.Duplicates = int64(res.Counted), int64(res.Duplicates)
	if a := res.Admission; a != nil {
		sum.AdmissionCounted, sum.AdmissionDuplicates = int64(a.Counted), int64(a.Duplicates)
	}
	for r, n := range res.SkippedBy {
		sum.skipN(r, int64(n))
	}
	return sum
}

// FuzzReplayChunksAgreeWithTheFullDecode replays the same file through
// the chunk path, with the pre-filter and without it (every line decoded),
// and line by line as replay did before it read chunks, with the
// pre-filter and without it. The chunk path must come to exactly the
// line-by-line summary, the invalid lines named with their numbers and
// reasons included, and count the same requests, whatever the chunk size
// and the line limit. With the pre-filter and without it, the counts are
// the same; as in auditjson's FuzzPrefilter, a line the pre-filter sets
// aside is validated only as JSON with a stage (not its timestamps, say),
// so an invalid line that cannot count may be set aside instead of named.
func FuzzReplayChunksAgreeWithTheFullDecode(f *testing.F) {
	for _, s := range replaySeeds(f) {
		f.Add(s, uint16(1<<15), uint16(4095))
		f.Add(s, uint16(300), uint16(100))
	}
	f.Add([]byte(`{"stage":"RequestReceived","requestReceivedTimestamp":"0"}`), uint16(1<<15), uint16(4095))
	rules, err := fieldrule.New(nil)
	if err != nil {
		f.Fatal(err)
	}
	agg := aggregate.New(aggregate.Options{Logger: zerolog.Nop(), FieldRules: rules, Now: func() time.Time { return ingesttest.CapturedNow }})
	prefilter := auditjson.NewPrefilter(agg.Interest())
	f.Fuzz(func(t *testing.T, data []byte, limit, size uint16) {
		if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			return // read as gzip
		}
		lim := limits{line: int(limit), chunk: chunkSize(size)}
		var sums [2]Summary
		var counted [2][]string
		for i, p := range []*auditjson.Prefilter{prefilter, nil} {
			ref := &planningSink{agg: agg, prefilter: p}
			want := lineByLine(t, data, lim.line, ref)
			sink := &planningSink{agg: agg, prefilter: p}
			got, err := replay(context.Background(), []Input{{Name: Stdin}}, bytes.NewReader(data), sink, nil, ReplayOptions{Prefilter: sink.prefilter}, lim)
			require.NoError(t, err)
			got.Elapsed = 0
			require.Equal(t, want, got, "pre-filter %v", p != nil)
			require.ElementsMatch(t, ref.counted, sink.counted, "pre-filter %v", p != nil)
			sums[i], counted[i] = got, sink.counted
		}
		filtered, full := sums[0], sums[1]
		require.ElementsMatch(t, counted[1], counted[0], "the pre-filter counts what the full decode does")
		require.Equal(t, full.Counted, filtered.Counted)
		require.Equal(t, full.AdmissionCounted, filtered.AdmissionCounted)
		setAsideInvalid := full.Invalid - filtered.Invalid
		require.GreaterOrEqual(t, setAsideInvalid, int64(0), "the pre-filter names no line the full decode takes")
		require.Equal(t, full.Events+setAsideInvalid, filtered.Events)
		require.Equal(t, full.Skipped+setAsideInvalid, filtered.Skipped)
	})
}

// A file cut into chunks far smaller than its lines replays as one read
// line by line: the same events counted, set aside and refused, the
// refused lines named by their numbers in the file.
func TestReplayChunksSmallerThanALine(t *testing.T) {
	rules, err := fieldrule.New(nil)
	require.NoError(t, err)
	agg := aggregate.New(aggregate.Options{Logger: zerolog.Nop(), FieldRules: rules, Now: func() time.Time { return ingesttest.CapturedNow }})
	data := mixedFile()
	for _, size := range []int{1, 100, 4096, chunkBytes} {
		sink := &planningSink{agg: agg, prefilter: auditjson.NewPrefilter(agg.Interest())}
		sum, err := replay(context.Background(), []Input{{Name: Stdin}}, bytes.NewReader(data), sink, nil, ReplayOptions{Prefilter: sink.prefilter}, limits{line: MaxLineBytes, chunk: size})
		require.NoError(t, err)
		sum.Elapsed = 0
		require.Equal(t, Summary{Inputs: 1, Events: 8, Counted: 4, Skipped: 4, SkippedBy: map[string]int64{"not_deprecated": 4}, Invalid: 2,
			Examples: []InvalidLine{
				{Input: Stdin, Line: 10, Reason: "malformed_json", Message: sum.Examples[0].Message},
				{Input: Stdin, Line: 11, Reason: "missing_stage", Message: sum.Examples[1].Message},
			}}, sum, "chunks of %d bytes", size)
		require.Equal(t, []string{"seed-00000000-4e5f-8a9b-000000000000", "seed-00000000-4e5f-8a9b-000000000003", "seed-00000000-4e5f-8a9b-000000000006", "esc"}, sink.counted,
			"the escaped annotation key counts too")
	}
}

// Lines are numbered in each input from 1, however the inputs fall into
// chunks.
func TestReplayNumbersLinesInEachInput(t *testing.T) {
	dir := t.TempDir()
	var inputs []Input
	for _, name := range []string{"a.log", "b.log"} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, mixedFile(), 0o600))
		inputs = append(inputs, Input{Name: path})
	}
	sink := &planningSink{agg: aggregate.New(aggregate.Options{Logger: zerolog.Nop(), Now: func() time.Time { return ingesttest.CapturedNow }})}
	sum, err := replay(context.Background(), inputs, nil, sink, nil, ReplayOptions{Prefilter: sink.prefilter}, limits{line: MaxLineBytes, chunk: 1000})
	require.NoError(t, err)
	require.Equal(t, int64(16), sum.Events)
	require.Equal(t, int64(4), sum.Invalid)
	var named []string
	for _, ex := range sum.Examples {
		named = append(named, filepath.Base(ex.Input)+":"+strconv.Itoa(ex.Line))
	}
	require.Equal(t, []string{"a.log:10", "a.log:11", "b.log:10", "b.log:11"}, named)
}
