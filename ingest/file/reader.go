// Package file reads audit log files, as kube-apiserver writes them with
// --audit-log-path: one JSON event per line, possibly gzip-compressed
// after rotation, and replays them through the same counting and dedupe as
// the webhook.
//
// Where the events go is the caller's choice: the package declares the Sink
// it needs, and the CLI plugs in a local aggregator or a remote server.
package file

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
)

// MaxLineBytes bounds one line. RequestResponse events of big objects reach
// a few MiB; anything far larger is not an audit event.
const MaxLineBytes = 64 << 20

// readBufferBytes is the read buffer of replay and follow alike; a longer
// line is gathered past it.
const readBufferBytes = 1 << 20

// Stdin is the path that means standard input.
const Stdin = "-"

// Input is one file to read.
type Input struct {
	// Name is the path, or "-" for standard input.
	Name string
	// Size is the size on disk, 0 when unknown (stdin).
	Size int64
}

// Expand turns paths (files, directories, "-") into inputs, directories
// walked in lexical order with hidden files left out.
func Expand(paths []string) ([]Input, error) {
	var out []Input
	for _, p := range paths {
		if p == Stdin {
			out = append(out, Input{Name: Stdin})
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			out = append(out, Input{Name: p, Size: fi.Size()})
			continue
		}
		var files []Input
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(d.Name(), ".") && path != p {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() {
				info, err := d.Info()
				if err != nil {
					return err
				}
				files = append(files, Input{Name: path, Size: info.Size()})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
		out = append(out, files...)
	}
	return out, nil
}

// Line is one line of an input.
type Line struct {
	Input  string
	Number int
	// Bytes is valid until the next line is read.
	Bytes []byte
	// TooLong is set, with Bytes empty, for a line over MaxLineBytes.
	TooLong bool
}

// countingReader counts bytes read from the file (compressed bytes for gzip)
// for progress.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// ReadLines calls fn for every non-blank line of in, decompressing gzip
// input (recognised by its magic bytes, whatever the name). bytesRead, if
// not nil, is advanced as the input is consumed.
func ReadLines(in Input, stdin io.Reader, bytesRead *atomic.Int64, fn func(Line) error) error {
	return readLines(in, stdin, bytesRead, MaxLineBytes, fn)
}

func readLines(in Input, stdin io.Reader, bytesRead *atomic.Int64, limit int, fn func(Line) error) error {
	var src io.Reader
	if in.Name == Stdin {
		src = stdin
	} else {
		f, err := os.Open(in.Name)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		src = f
	}
	if bytesRead == nil {
		bytesRead = &atomic.Int64{}
	}
	br := bufio.NewReaderSize(countingReader{src, bytesRead}, readBufferBytes)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: not valid gzip: %w", in.Name, err)
		}
		defer func() { _ = zr.Close() }()
		br = bufio.NewReaderSize(zr, readBufferBytes)
	}
	sc := newLineScanner(br, limit)
	number := 0
	for {
		l, err := sc.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: reading line %d: %w", in.Name, number+1, err)
		}
		// A last line without a newline is still a line: the file is
		// complete when it is replayed.
		number++
		if line, ok := l.line(); ok {
			line.Input, line.Number = in.Name, number
			if ferr := fn(line); ferr != nil {
				return ferr
			}
		}
	}
}

// scanned is one line found by a lineScanner.
type scanned struct {
	// bytes is the line with its newline, valid until the next call; nil
	// when tooLong.
	bytes []byte
	// size is how many bytes of the input the line takes, newline
	// included, also when it is too long.
	size int64
	// tooLong is set for a line of more than the limit (newline not
	// counted); its bytes were not kept.
	tooLong bool
	// complete is false for a last line that has no newline (yet).
	complete bool
}

// line is what replay and follow both hand to DecodeLine: the line without
// the white space around it (a CRLF's CR included), or, for a line over the
// limit, a Line marked TooLong. ok is false for a blank line, which is
// numbered and passed over. Input and Number are the caller's to set.
func (l scanned) line() (_ Line, ok bool) {
	if l.tooLong {
		return Line{TooLong: true}, true
	}
	trimmed := bytes.TrimSpace(l.bytes)
	return Line{Bytes: trimmed}, len(trimmed) > 0
}

// lineScanner splits a reader into lines of at most limit bytes. A longer
// line is read through to its end without being kept, so memory stays
// bounded by the limit and reading always moves on. Replay and follow share
// it, so both judge a line the same way.
type lineScanner struct {
	br    *bufio.Reader
	limit int
	long  []byte // a line longer than br's buffer, gathered
}

func newLineScanner(br *bufio.Reader, limit int) *lineScanner {
	return &lineScanner{br: br, limit: limit}
}

// next returns the next line, or io.EOF when the input ends on a line
// boundary.
func (s *lineScanner) next() (scanned, error) {
	var l scanned
	s.long = s.long[:0]
	for {
		chunk, err := s.br.ReadSlice('\n')
		l.size += int64(len(chunk))
		if !l.tooLong {
			if len(s.long) > 0 || errors.Is(err, bufio.ErrBufferFull) {
				s.long = append(s.long, chunk...)
				l.bytes = s.long
			} else {
				l.bytes = chunk
			}
			if len(bytes.TrimSuffix(l.bytes, []byte{'\n'})) > s.limit {
				// Nothing of it is kept: let the buffer go too.
				l.tooLong, l.bytes, s.long = true, nil, nil
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil:
			l.complete = true
			return l, nil
		case errors.Is(err, io.EOF):
			if l.size == 0 {
				return l, io.EOF
			}
			return l, nil
		default:
			return l, err
		}
	}
}
