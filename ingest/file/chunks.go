package file

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// Replay reads an input a block at a time rather than a line at a time:
// the reader only fills chunks with whole lines, and the scanners, one
// per core, find the lines in them. The reader then costs a read and,
// for a line cut by the block's end, a copy of that line's start.

// chunkReader cuts one input into runs of whole lines.
type chunkReader struct {
	r io.Reader
	// limit is the longest line kept, newline not counted (MaxLineBytes).
	limit int
	// size is how many bytes a chunk is filled with, about.
	size int
	// carry is the start of a line cut by the last chunk's end.
	carry []byte
	eof   bool
}

// openChunks opens in (stdin for "-"), decompressing gzip input
// (recognised by its magic bytes, whatever the name), counting the bytes
// read from it into bytesRead. close releases it.
func openChunks(in Input, stdin io.Reader, bytesRead *atomic.Int64, limit, size int) (_ *chunkReader, closeFn func(), _ error) {
	var src io.Reader
	closeFn = func() {}
	if in.Name == Stdin {
		src = stdin
	} else {
		f, err := os.Open(in.Name)
		if err != nil {
			return nil, nil, err
		}
		src, closeFn = f, func() { _ = f.Close() }
	}
	if bytesRead == nil {
		bytesRead = &atomic.Int64{}
	}
	// A small buffer, to peek at the magic bytes: reads of a chunk's size
	// then go straight to the file, without a copy through it.
	br := bufio.NewReaderSize(countingReader{src, bytesRead}, 64<<10)
	r := io.Reader(br)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			closeFn()
			return nil, nil, fmt.Errorf("%s: not valid gzip: %w", in.Name, err)
		}
		r = zr
		fileClose := closeFn
		closeFn = func() { _ = zr.Close(); fileClose() }
	}
	return &chunkReader{r: r, limit: limit, size: size}, closeFn, nil
}

// next fills buf (reused, grown as needed) with the next run of whole
// lines: each ends with a newline but the input's last, which may not. A
// line over the limit comes alone, with tooLong set and buf empty, its
// bytes read through and never kept. ok is false at the end of the input.
func (r *chunkReader) next(buf []byte) (_ []byte, tooLong, ok bool, _ error) {
	if cap(buf) < r.size {
		buf = make([]byte, 0, r.size)
	}
	buf = append(buf[:0], r.carry...)
	r.carry = r.carry[:0]
	searched := 0 // buf[:searched] has no newline
	for {
		var err error
		buf, err = r.fill(buf)
		if err != nil {
			return buf[:0], false, false, err
		}
		if len(buf) == 0 {
			return buf, false, false, nil
		}
		if last := bytes.LastIndexByte(buf[searched:], '\n'); last >= 0 {
			last += searched
			r.carry = append(r.carry, buf[last+1:]...)
			return buf[:last+1], false, true, nil
		}
		if r.eof {
			// The last line, without a newline: the file is complete.
			return buf, false, true, nil
		}
		searched = len(buf)
		if len(buf) > r.limit {
			buf, err = r.skipLine(buf)
			return buf[:0], true, err == nil, err
		}
		// One line fills the chunk: room for more of it, up to one byte
		// over the limit, which tells it is too long.
		grown := make([]byte, len(buf), min(2*cap(buf), r.limit+1+r.size))
		copy(grown, buf)
		buf = grown
	}
}

// fill reads into buf until it is full or the input ends.
func (r *chunkReader) fill(buf []byte) ([]byte, error) {
	for len(buf) < cap(buf) && !r.eof {
		n, err := r.r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF):
			r.eof = true
		case err != nil:
			return buf, err
		}
	}
	return buf, nil
}

// skipLine reads through the rest of a line too long to keep, using buf
// as room, and carries what follows its newline.
func (r *chunkReader) skipLine(buf []byte) ([]byte, error) {
	for {
		var err error
		buf, err = r.fill(buf[:0])
		if err != nil {
			return buf, err
		}
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			r.carry = append(r.carry, buf[i+1:]...)
			return buf, nil
		}
		if r.eof {
			return buf, nil
		}
	}
}
