package file

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// Replay runs in three stages at once, so that a slow commit does not stall
// reading and one core does not bound scanning:
//
//   - the reader reads each input into chunks of whole lines, in order;
//   - scanners, one per core, cut a chunk into lines, set aside what
//     cannot count and decode the rest;
//   - reorder puts the scanned chunks back in order (so batches and
//     the invalid lines named come out as a one-goroutine read gives them)
//     and hands batches to senders, up to ReplayOptions.InFlight at once.

// chunkBytes is how many bytes the reader reads into a chunk at once; a
// longer line grows its chunk, up to MaxLineBytes.
const chunkBytes = 512 << 10

// ReplayOptions fits a replay to its sink.
type ReplayOptions struct {
	// Prefilter, when the sink needs only the events that may count, sets
	// the others aside by their bytes, undecoded; Replay tallies them
	// itself. Nil decodes every line.
	Prefilter *auditjson.Prefilter
	// InFlight is how many batches may be in the sink's Send at once:
	// with a local aggregator they share one commit and one fsync. Less
	// than 1 is 1.
	InFlight int
}

// chunk is lines read in a row, from one input.
type chunk struct {
	seq int
	// input is the input's name and index among the inputs.
	input  string
	inputN int
	// buf holds whole lines, each with its newline but an input's last.
	buf []byte
	// tooLong is a chunk of one line over MaxLineBytes, not kept.
	tooLong bool
}

// scannedChunk is what a chunk's lines came to.
type scannedChunk struct {
	seq    int
	inputN int
	// lines is how many lines the chunk held, blank ones included.
	lines int
	// events decoded, and their lines (copied: the chunk is reused).
	events []classify.Event
	raw    [][]byte
	// read is how many lines were events, decoded or set aside.
	read    int64
	skipped map[classify.Result]int64
	invalid int64
	// examples are the first invalid lines of the chunk, numbered from
	// the chunk's first line: reorder numbers them in the input.
	examples []InvalidLine
}

// readChunks reads every input into chunks, numbered from 0, until the
// inputs end, ctx is done or reading fails.
// A chunk is sent only with a token, which reorder gives back once it has
// taken the chunk in order: so one slow chunk (a line of many MiB) holds
// back at most cap(tokens) chunks behind it.
func readChunks(ctx context.Context, inputs []Input, stdin io.Reader, prog *Progress, lim limits, free *sync.Pool, tokens chan<- struct{}, out chan<- *chunk) error {
	seq := 0
	for n, in := range inputs {
		r, closeInput, err := openChunks(in, stdin, &prog.Bytes, lim.line, lim.chunk)
		if err != nil {
			return err
		}
		err = func() error {
			defer closeInput()
			for {
				c := free.Get().(*chunk)
				buf, tooLong, ok, err := r.next(c.buf)
				c.seq, c.input, c.inputN, c.buf, c.tooLong = seq, in.Name, n, buf, tooLong
				if err != nil {
					return fmt.Errorf("%s: reading: %w", in.Name, err)
				}
				if !ok {
					free.Put(c)
					return nil
				}
				select {
				case tokens <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				select {
				case out <- c:
				case <-ctx.Done():
					return ctx.Err()
				}
				seq++
			}
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// limits are MaxLineBytes and chunkBytes, smaller in tests.
type limits struct{ line, chunk int }

// eachLine calls fn for every line of c that is not blank, numbered from
// the chunk's first, and returns how many lines c holds, blank ones
// included: the lines ReadLines gives.
func eachLine(c *chunk, limit int, fn func(Line)) int {
	if c.tooLong {
		fn(Line{Input: c.input, Number: 1, TooLong: true})
		return 1
	}
	n := 0
	for buf := c.buf; len(buf) > 0; {
		line := buf
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			line, buf = buf[:i], buf[i+1:]
		} else {
			buf = nil
		}
		n++
		l := Line{Input: c.input, Number: n}
		if len(line) > limit {
			l.TooLong = true
		} else if l.Bytes = bytes.TrimSpace(line); len(l.Bytes) == 0 {
			continue
		}
		fn(l)
	}
	return n
}

// scan judges a chunk's lines as a one-goroutine replay would.
func scan(c *chunk, prefilter *auditjson.Prefilter, limit int, prog *Progress) *scannedChunk {
	out := &scannedChunk{seq: c.seq, inputN: c.inputN}
	out.lines = eachLine(c, limit, func(l Line) {
		if !l.TooLong {
			if r, skip := prefilter.Skip(l.Bytes); skip {
				out.read++
				if out.skipped == nil {
					out.skipped = map[classify.Result]int64{}
				}
				out.skipped[r.Result]++
				return
			}
		}
		ev, bad := DecodeLine(l)
		if bad != nil {
			out.invalid++
			if len(out.examples) < maxReportedInvalid {
				out.examples = append(out.examples, InvalidLine{Input: l.Input, Line: l.Number, Reason: string(bad.Reason), Message: bad.Message})
			}
			return
		}
		out.read++
		out.events = append(out.events, ev)
		out.raw = append(out.raw, append([]byte(nil), l.Bytes...))
	})
	prog.Events.Add(out.read)
	return out
}

// release gives a scanned chunk's buffer back for reuse, unless a long
// line grew it far past a chunk's size.
func release(free *sync.Pool, c *chunk, lim limits) {
	if cap(c.buf) <= 2*lim.chunk {
		free.Put(c)
	}
}

// sender hands batches to the sink, up to inFlight at once, and adds up
// what became of them. The first error cancels the replay.
type sender struct {
	ctx     context.Context
	cancel  context.CancelFunc
	sink    Sink
	batches chan batch
	wg      sync.WaitGroup

	mu  sync.Mutex
	sum *Summary
	err error
}

type batch struct {
	events []classify.Event
	raw    [][]byte
}

func startSender(ctx context.Context, cancel context.CancelFunc, sink Sink, inFlight int, sum *Summary) *sender {
	inFlight = max(inFlight, 1)
	s := &sender{ctx: ctx, cancel: cancel, sink: sink, batches: make(chan batch), sum: sum}
	for range inFlight {
		s.wg.Go(func() {
			for b := range s.batches {
				s.send(b)
			}
		})
	}
	return s
}

func (s *sender) send(b batch) {
	if s.ctx.Err() != nil {
		return
	}
	res, err := s.sink.Send(s.ctx, b.events, b.raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		s.cancel()
		return
	}
	s.sum.Counted += int64(res.Counted)
	s.sum.Duplicates += int64(res.Duplicates)
	if a := res.Admission; a != nil {
		s.sum.AdmissionCounted += int64(a.Counted)
		s.sum.AdmissionDuplicates += int64(a.Duplicates)
	}
	for r, n := range res.SkippedBy {
		s.sum.skipN(r, int64(n))
	}
}

// wait waits for every batch handed over and returns the first error.
func (s *sender) wait() error {
	close(s.batches)
	s.wg.Wait()
	return s.err
}

// reorder puts scanned chunks back in order, adds them to sum and hands
// their events to the sender in batches. It drains in until it closes.
func reorder(ctx context.Context, in <-chan *scannedChunk, tokens <-chan struct{}, s *sender, sum *Summary) {
	pending := map[int]*scannedChunk{}
	next := 0
	// The input being read, and how many of its lines came before.
	inputN, before := 0, 0
	var b batch
	size := 0
	flush := func() {
		if len(b.events) == 0 {
			return
		}
		select {
		case s.batches <- b:
		case <-ctx.Done():
		}
		b, size = batch{}, 0
	}
	for sc := range in {
		pending[sc.seq] = sc
		for sc = pending[next]; sc != nil; sc = pending[next] {
			delete(pending, next)
			next++
			<-tokens
			if ctx.Err() != nil {
				continue
			}
			if sc.inputN != inputN {
				inputN, before = sc.inputN, 0
			}
			s.mu.Lock()
			sum.Events += sc.read
			for r, n := range sc.skipped {
				sum.skipN(string(r), n)
			}
			sum.Invalid += sc.invalid
			for _, ex := range sc.examples {
				if len(sum.Examples) < maxReportedInvalid {
					ex.Line += before
					sum.Examples = append(sum.Examples, ex)
				}
			}
			s.mu.Unlock()
			before += sc.lines
			for i := range sc.events {
				b.events = append(b.events, sc.events[i])
				b.raw = append(b.raw, sc.raw[i])
				size += len(sc.raw[i])
				if len(b.events) >= DefaultBatchSize || size >= maxBatchBytes {
					flush()
				}
			}
		}
	}
	flush()
}

// Replay reads every input and sends its events to sink in batches.
// Invalid lines are counted and the first few named; they never stop the
// replay. A sink error does: what was sent before it is committed, and
// replaying again is safe because requests are deduplicated.
func Replay(ctx context.Context, inputs []Input, stdin io.Reader, sink Sink, prog *Progress, opts ReplayOptions) (Summary, error) {
	return replay(ctx, inputs, stdin, sink, prog, opts, limits{line: MaxLineBytes, chunk: chunkBytes})
}

func replay(ctx context.Context, inputs []Input, stdin io.Reader, sink Sink, prog *Progress, opts ReplayOptions, lim limits) (Summary, error) {
	start := time.Now()
	sum := Summary{Inputs: len(inputs)}
	if prog == nil {
		prog = &Progress{}
	}
	prefilter := opts.Prefilter
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := runtime.GOMAXPROCS(0)
	chunks := make(chan *chunk, workers)
	scanned := make(chan *scannedChunk, 2*workers)
	free := &sync.Pool{New: func() any { return &chunk{} }}
	tokens := make(chan struct{}, 4*workers)

	var readErr error
	var scanners sync.WaitGroup
	scanners.Go(func() {
		defer close(chunks)
		readErr = readChunks(ctx, inputs, stdin, prog, lim, free, tokens, chunks)
	})
	for range workers {
		scanners.Go(func() {
			for c := range chunks {
				sc := scan(c, prefilter, lim.line, prog)
				release(free, c, lim)
				scanned <- sc
			}
		})
	}
	go func() { scanners.Wait(); close(scanned) }()

	s := startSender(ctx, cancel, sink, opts.InFlight, &sum)
	reorder(ctx, scanned, tokens, s, &sum)
	sendErr := s.wait()
	sum.Elapsed = time.Since(start)
	switch {
	case readErr != nil && (sendErr == nil || ctx.Err() == nil):
		return sum, readErr
	case sendErr != nil:
		return sum, sendErr
	}
	return sum, ctx.Err()
}
