package file

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/internal/backoff"
)

// SourceFollow is the source label of events read by following a file.
const SourceFollow = "file"

// FollowOptions configures a Follower.
type FollowOptions struct {
	Path, Cluster, Node string
	Ingester            sink.Ingester
	// Tallies counts what could not be decoded or was set aside
	// undecoded; nil counts nothing.
	Tallies sink.Tallies
	Cursors sink.CursorReader
	Logger  zerolog.Logger
	// Poll is how often the end of the file is checked; zero means 250ms.
	Poll time.Duration
	// RetryBackoff is the first pause after a failure (doubling up to
	// 30s); zero means 1s.
	RetryBackoff time.Duration
	// OnCommit, if set, is called with the offset after each commit.
	OnCommit func(offset int64)
	// Prefilter sets aside, undecoded, the lines that cannot count, as
	// replay does; nil decodes every line. What it sets aside is told to
	// Tallies.
	Prefilter *auditjson.Prefilter
}

// position is where reading stopped: a file, by device and inode so that a
// rotation is noticed, and a byte offset just after a complete line.
type position struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Offset int64  `json:"offset"`
}

// Follower tails one audit log file across rotations, like `tail -F`, and
// counts what is appended. Its position is committed with the counts, so a
// restart neither skips nor re-reads a line.
type Follower struct {
	opts    FollowOptions
	tallies sink.Tallies
	origin  classify.Origin
	log     zerolog.Logger
	// Lines counts lines read (complete lines, blank ones included).
	Lines atomic.Int64
}

// NewFollower builds a follower; call Run.
func NewFollower(o FollowOptions) *Follower {
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = time.Second
	}
	return &Follower{opts: o, tallies: sink.OrNone(o.Tallies), origin: classify.Origin{Source: SourceFollow, Cluster: o.Cluster, Node: o.Node},
		log: o.Logger.With().Str("component", "follow").Str("path", o.Path).Logger()}
}

func (f *Follower) cursorName() string { return "file:" + f.opts.Path }

func identity(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}

// Run follows the file until ctx is done. A file that does not exist yet is
// waited for.
func (f *Follower) Run(ctx context.Context) error {
	var pos position
	if raw, ok, err := f.opts.Cursors.Cursor(f.cursorName()); err != nil {
		return fmt.Errorf("follow %s: reading position: %w", f.opts.Path, err)
	} else if ok {
		if err := json.Unmarshal(raw, &pos); err != nil {
			return fmt.Errorf("follow %s: corrupt position: %w", f.opts.Path, err)
		}
	}
	retry := backoff.New(f.opts.RetryBackoff, 30*time.Second)
	for {
		file, fi, err := f.open(ctx)
		if err != nil {
			return err
		}
		dev, ino := identity(fi)
		if pos.Ino != 0 && (pos.Dev != dev || pos.Ino != ino) {
			// Rotated while we were not reading: finish the old file
			// first, if it is still next to the new one.
			if err := f.finishRotated(ctx, pos); err != nil {
				_ = file.Close()
				return err
			}
			pos = position{}
		}
		pos.Dev, pos.Ino = dev, ino
		if fi.Size() < pos.Offset {
			f.log.Info().Int64("offset", pos.Offset).Int64("size", fi.Size()).Msg("file was truncated; reading from the start")
			pos.Offset = 0
		}
		next, err := f.follow(ctx, file, pos)
		_ = file.Close()
		pos = next
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A failed commit or read: nothing past pos was committed, so
			// read again from there after a pause.
			if errors.Is(err, countkey.ErrNoSpace) {
				// Paused until there is room; look again at the first pace.
				retry.Reset()
				f.log.Warn().Err(err).Int64("offset", pos.Offset).Dur("retry_in", retry.Peek()).Msg("following paused: no room to commit")
			} else {
				f.log.Error().Err(err).Int64("offset", pos.Offset).Dur("retry_in", retry.Peek()).Msg("following failed; retrying from the last committed line")
			}
			if !retry.Wait(ctx) {
				return ctx.Err()
			}
			continue
		}
		retry.Reset()
	}
}

// open waits until the path exists and opens it.
func (f *Follower) open(ctx context.Context) (*os.File, os.FileInfo, error) {
	for warned := false; ; warned = true {
		file, err := os.Open(f.opts.Path)
		if err == nil {
			fi, err := file.Stat()
			if err != nil {
				_ = file.Close()
				return nil, nil, err
			}
			return file, fi, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("follow %s: %w", f.opts.Path, err)
		}
		if !warned {
			f.log.Warn().Msg("file does not exist yet; waiting for it")
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(f.opts.Poll):
		}
	}
}

// finishRotated reads the rest of the file that pos points into, found by
// inode in the same directory (kube-apiserver renames audit.log to
// audit-<time>.log). A compressed or deleted file cannot be found; its tail
// is then lost, and said so.
func (f *Follower) finishRotated(ctx context.Context, pos position) error {
	dir := filepath.Dir(f.opts.Path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("follow %s: %w", f.opts.Path, err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if dev, ino := identity(fi); dev == pos.Dev && ino == pos.Ino {
			old, err := os.Open(filepath.Join(dir, e.Name()))
			if err != nil {
				return fmt.Errorf("follow %s: %w", f.opts.Path, err)
			}
			defer func() { _ = old.Close() }()
			f.log.Info().Str("rotated_to", e.Name()).Int64("offset", pos.Offset).Msg("reading the rest of the rotated file")
			_, err = f.readToEnd(ctx, old, pos)
			return err
		}
	}
	f.log.Warn().Int64("offset", pos.Offset).Msg("the file was rotated while sunset was stopped and its old copy is gone; events after the last position in it are lost")
	return nil
}

// follow reads file from pos, waits for more at the end, and returns when
// the path names another file (rename rotation) or the file shrinks
// (copytruncate), with the position to continue from.
func (f *Follower) follow(ctx context.Context, file *os.File, pos position) (position, error) {
	for {
		var err error
		if pos, err = f.readToEnd(ctx, file, pos); err != nil {
			return pos, err
		}
		select {
		case <-ctx.Done():
			return pos, ctx.Err()
		case <-time.After(f.opts.Poll):
		}
		fi, err := os.Stat(f.opts.Path)
		if errors.Is(err, os.ErrNotExist) {
			continue // between rename and create
		}
		if err != nil {
			return pos, fmt.Errorf("follow %s: %w", f.opts.Path, err)
		}
		if dev, ino := identity(fi); dev != pos.Dev || ino != pos.Ino {
			// Renamed: drain what the writer put in the old file before
			// it let go, then switch.
			if _, err := f.readToEnd(ctx, file, pos); err != nil {
				return pos, err
			}
			f.log.Info().Msg("file was rotated; following the new one")
			return position{}, nil
		}
		if fi.Size() < pos.Offset {
			return position{Dev: pos.Dev, Ino: pos.Ino}, nil
		}
	}
}

// batchLinesSetAside is how many lines set aside a commit holds at most.
const batchLinesSetAside = 16 * DefaultBatchSize

// skip reports whether the pre-filter sets the line aside; a line over
// MaxLineBytes is left to DecodeLine, which says so.
func (f *Follower) skip(l Line) (classify.SetAside, bool) {
	if l.TooLong {
		return classify.SetAside{}, false
	}
	return f.opts.Prefilter.Skip(l.Bytes)
}

// readToEnd counts every complete line from pos to the current end of the
// file, committing a batch at a time with its position. A line that is not
// an audit event, too long ones included, is skipped and counted by reason
// as replay does, and the position moves past it: one bad line never holds
// up the lines after it.
func (f *Follower) readToEnd(ctx context.Context, file *os.File, pos position) (position, error) {
	if _, err := file.Seek(pos.Offset, io.SeekStart); err != nil {
		return pos, err
	}
	sc := newLineScanner(bufio.NewReaderSize(file, readBufferBytes), MaxLineBytes)
	var (
		events []classify.Event
		aside  classify.Prefiltered
		bad    map[auditjson.Reason]int
		first  int64 // offset of the first bad line of the batch
	)
	commit := func(at int64) error {
		cur := position{Dev: pos.Dev, Ino: pos.Ino, Offset: at}
		raw, _ := json.Marshal(cur)
		if _, err := f.opts.Ingester.IngestAt(ctx, f.origin, events, countkey.Cursor{Name: f.cursorName(), Value: raw}); err != nil {
			return err
		}
		// Counted once committed: a failed commit reads the same lines
		// again.
		if aside != (classify.Prefiltered{}) {
			f.tallies.CountPrefiltered(SourceFollow, aside)
			f.tallies.HeardReads(f.origin.Cluster, aside.Reads > 0)
		}
		invalid := 0
		for reason, n := range bad {
			f.tallies.CountDecodeError(SourceFollow, string(reason), n)
			invalid += n
		}
		if invalid > 0 {
			f.tallies.CountInvalid(SourceFollow, invalid)
			f.log.Warn().Int("lines", invalid).Int64("first_offset", first).Interface("reasons", bad).
				Msg("skipped lines that are not audit events")
		}
		pos = cur
		events, bad, aside = events[:0], nil, classify.Prefiltered{}
		if f.opts.OnCommit != nil {
			f.opts.OnCommit(at)
		}
		return nil
	}
	offset := pos.Offset
	for {
		l, err := sc.next()
		if errors.Is(err, io.EOF) || (err == nil && !l.complete) {
			// A partial last line waits for the writer to finish it.
			break
		}
		if err != nil {
			return pos, fmt.Errorf("follow %s: %w", f.opts.Path, err)
		}
		at := offset
		offset += l.size
		f.Lines.Add(1)
		if line, ok := l.line(); ok {
			if r, skip := f.skip(line); skip {
				aside.Add(r)
			} else if ev, e := DecodeLine(line); e != nil {
				if bad == nil {
					bad, first = map[auditjson.Reason]int{}, at
				}
				bad[e.Reason]++
			} else {
				events = append(events, ev)
			}
		}
		// Lines set aside cost little, but a commit also moves the
		// position: one every batchLinesSetAside of them at most.
		if len(events) >= DefaultBatchSize || aside.OtherStage+aside.NotDeprecated >= batchLinesSetAside {
			if err := commit(offset); err != nil {
				return pos, err
			}
		}
	}
	if offset != pos.Offset {
		if err := commit(offset); err != nil {
			return pos, err
		}
	}
	return pos, nil
}
