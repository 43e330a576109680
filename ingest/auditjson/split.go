package auditjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kube-sunset/sunset/classify"
)

// maxItemBytes is the largest item of a streamed list that is decoded, with
// the space and comma before it: twice kube-apiserver's largest object
// (etcd's 1.5 MiB) in a RequestResponse event, request and response, with
// room. A longer item is skipped as it streams by, never held, and
// counted (ReasonTooLarge); the rest of its list counts.
const maxItemBytes = 8 << 20

// splitItems decodes the items of a list, the opening bracket read by dec,
// reading what dec has buffered and then src. Items are split by the
// scanner, not by dec, so that an item that is not an object (junk, that
// encoding/json would allocate an error for) costs nothing: it is counted
// and never decoded; nor does an item over maxItemBytes, which is skipped
// as it streams by. Objects are decoded one at a time where they lie in
// the splitter's buffer, and only the events are kept, with a copy of
// their request object when keep asks for it. It returns a decoder of the
// rest of the envelope, as if the items had been an empty value of an
// empty key, and the body offset of what that decoder reads.
func splitItems(dec *json.Decoder, src io.Reader, keep func(*classify.Event) bool, acct *Account) ([]classify.Event, Invalid, *json.Decoder, int64, error) {
	s := &splitter{src: io.MultiReader(dec.Buffered(), src), base: dec.InputOffset(), maxItem: maxItemBytes, acct: acct}
	var events []classify.Event
	var bad Invalid
	for i := 0; ; i++ {
		start, end, done, tooLarge, err := s.item(i)
		if err != nil {
			return nil, Invalid{}, nil, 0, err
		}
		if tooLarge {
			if done, err = s.skip(i); err != nil {
				return nil, Invalid{}, nil, 0, err
			}
			if !done {
				bad.add(i, errItemTooLarge)
				continue
			}
		}
		if done {
			break
		}
		raw := s.buf[start:end]
		s.pos = end
		if !objectOrNull(raw) {
			bad.addNonObject(i, raw)
			continue
		}
		ev, err := decodeInPlace(raw)
		if err != nil {
			var e *Error
			errors.As(err, &e)
			bad.add(i, e)
			continue
		}
		// The request object lies in the splitter's buffer, which the
		// next item overwrites.
		if keep != nil && len(ev.RequestObject) > 0 && keep(&ev) {
			ev.RequestObject = bytes.Clone(ev.RequestObject)
		} else {
			ev.RequestObject = nil
		}
		if err := acct.take(eventCost(&ev)); err != nil {
			return nil, Invalid{}, nil, 0, err
		}
		events = append(events, ev)
	}
	// The rest of the envelope, after an empty member standing in for
	// the items. kube-apiserver sends only the closing brace; more than
	// maxWholeBody of it is refused, rather than held by the decoder.
	const stand = `{"":0`
	rest := &capReader{r: io.MultiReader(bytes.NewReader(s.buf[s.pos:]), s.src), left: maxWholeBody}
	tail := json.NewDecoder(io.MultiReader(strings.NewReader(stand), rest))
	if _, err := tail.Token(); err != nil {
		return nil, Invalid{}, nil, 0, streamError(tail, "after the items", err)
	}
	return events, bad, tail, s.base + int64(s.pos) - int64(len(stand)), nil
}

// errItemTooLarge is an item skipped for its size.
var errItemTooLarge = &Error{ReasonTooLarge, fmt.Sprintf("event is over %d bytes; it was skipped unread", maxItemBytes)}

// capReader fails with errBodyNotStreamable once more than left bytes are
// read.
type capReader struct {
	r    io.Reader
	left int
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errBodyNotStreamable
	}
	n, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

// splitter splits the items of a list as they are read.
type splitter struct {
	src io.Reader
	buf []byte
	// pos is where in buf the next item's separator starts.
	pos int
	// base is the body offset of buf[0].
	base int64
	eof  bool
	// maxItem bounds an item with the space before it; acct pays for
	// buf's growth.
	maxItem int
	acct    *Account
}

// item finds item i: from pos, the comma before it (for all but the
// first) and the item itself, at buf[start:end]; or the closing bracket
// (done, with pos after it). It reads more as needed, up to maxItem bytes
// from pos: past that, tooLarge, and skip takes over.
func (s *splitter) item(i int) (start, end int, done, tooLarge bool, err error) {
	for {
		start, end, done, ok := s.scan(i)
		if ok {
			return start, end, done, false, nil
		}
		if s.eof {
			return 0, 0, false, false, s.syntaxError(i)
		}
		if len(s.buf)-s.pos > s.maxItem {
			return 0, 0, false, true, nil
		}
		if err := s.fill(); err != nil {
			return 0, 0, false, false, err
		}
	}
}

// scan is item within what is read; ok is false when that is not enough
// (or not valid JSON: the end of the body tells which).
func (s *splitter) scan(i int) (start, end int, done, ok bool) {
	b := s.buf
	j := skipSpace(b, s.pos)
	if j >= len(b) {
		return 0, 0, false, false
	}
	if b[j] == ']' {
		s.pos = j + 1
		return 0, 0, true, true
	}
	if i > 0 {
		if b[j] != ',' {
			return 0, 0, false, false
		}
		if j = skipSpace(b, j+1); j >= len(b) {
			return 0, 0, false, false
		}
	}
	end = skipValue(b, j, 2)
	if end < 0 || (end == len(b) && !s.eof && (b[j] == '-' || isDigit(b[j]))) {
		// Incomplete, or a number that may go on.
		return 0, 0, false, false
	}
	return j, end, false, true
}

// fill reads at least as much again as is left of buf after pos, so that
// an item scanned again after each read costs linear time in all.
func (s *splitter) fill() error {
	if s.pos > 0 {
		n := copy(s.buf, s.buf[s.pos:])
		s.buf, s.base, s.pos = s.buf[:n], s.base+int64(s.pos), 0
	}
	// Never more than an item's bound and one byte: that byte tells
	// that the item is over it.
	target := min(len(s.buf)+max(len(s.buf), 4096), s.maxItem+1)
	old := cap(s.buf)
	s.buf = slices.Grow(s.buf, target-len(s.buf))
	if err := s.acct.take(int64(cap(s.buf) - old)); err != nil {
		return err
	}
	limit := min(cap(s.buf), s.maxItem+1)
	for len(s.buf) < target {
		n, err := s.src.Read(s.buf[len(s.buf):limit])
		s.buf = s.buf[:len(s.buf)+n]
		if err == io.EOF {
			s.eof = true
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// skip passes over item i, from pos, as it streams by: the comma before
// it, the item and nothing after it, reading into buf without growing it.
// done is the list's closing bracket coming instead of an item. The item
// is checked only as far as a skip needs: its strings and brackets.
func (s *splitter) skip(i int) (done bool, err error) {
	st := skipper{needComma: i > 0}
	for {
		n, fin, done, bad := st.feed(s.buf[s.pos:])
		s.pos += n
		switch {
		case bad:
			return false, &Error{ReasonMalformedJSON, fmt.Sprintf("body is not valid JSON in item %d", i)}
		case fin:
			return done, nil
		case s.eof:
			return false, &Error{ReasonMalformedJSON, fmt.Sprintf("body is not valid JSON in item %d: unexpected end of JSON input", i)}
		}
		s.base += int64(s.pos)
		s.buf, s.pos = s.buf[:0], 0
		for !s.eof && len(s.buf) == 0 {
			n, err := s.src.Read(s.buf[:cap(s.buf)])
			s.buf = s.buf[:n]
			if err == io.EOF {
				s.eof = true
			} else if err != nil {
				return false, err
			}
		}
	}
}

// skipper walks a JSON value a piece at a time, keeping only how deep it
// is.
type skipper struct {
	// needComma: the comma before the item is still to come.
	needComma, sawComma bool
	started             bool
	stack               []byte
	inString, escape    bool
	hex                 int
	scalar              bool
}

// feed walks b: n is what it consumed, fin that the item (or, done, the
// list) ended, bad that b cannot be JSON.
func (st *skipper) feed(b []byte) (n int, fin, done, bad bool) {
	for ; n < len(b); n++ {
		c := b[n]
		if st.inString {
			switch {
			case st.hex > 0:
				if !isHex(c) {
					return n, false, false, true
				}
				st.hex--
			case st.escape:
				st.escape = false
				switch c {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					st.hex = 4
				default:
					return n, false, false, true
				}
			case c == '\\':
				st.escape = true
			case c == '"':
				st.inString = false
				if len(st.stack) == 0 {
					return n + 1, true, false, false
				}
			case c < 0x20:
				return n, false, false, true
			}
			continue
		}
		if !st.started {
			switch {
			case c == ' ' || c == '\t' || c == '\n' || c == '\r':
				continue
			case c == ',' && st.needComma:
				st.needComma, st.sawComma = false, true
				continue
			case c == ']' && !st.sawComma:
				return n + 1, true, true, false
			case st.needComma:
				return n, false, false, true
			}
			st.started = true
		}
		switch c {
		case '"':
			if st.scalar {
				return n, false, false, true
			}
			st.inString = true
		case '{', '[':
			if st.scalar || len(st.stack) >= maxScanDepth {
				return n, false, false, true
			}
			st.stack = append(st.stack, c)
		case '}', ']':
			if len(st.stack) == 0 {
				// After a top-level number or literal: the list's end.
				return n, st.scalar, false, !st.scalar
			}
			if open := st.stack[len(st.stack)-1]; (c == '}') != (open == '{') {
				return n, false, false, true
			}
			st.stack = st.stack[:len(st.stack)-1]
			if len(st.stack) == 0 {
				return n + 1, true, false, false
			}
		case ' ', '\t', '\n', '\r', ',', ':':
			if len(st.stack) == 0 {
				return n, st.scalar, false, !st.scalar
			}
		default:
			if !isDigit(c) && !strings.ContainsRune("-+.eEtrufalsn", rune(c)) {
				return n, false, false, true
			}
			if len(st.stack) == 0 {
				st.scalar = true
			}
		}
	}
	return n, false, false, false
}

// syntaxError says what is wrong at item i, the body read to its end:
// encoding/json's error for the rest of the list, read as a list.
func (s *splitter) syntaxError(i int) error {
	prefix := "["
	if i > 0 {
		prefix = "[0"
	}
	dec := json.NewDecoder(io.MultiReader(strings.NewReader(prefix), bytes.NewReader(s.buf[s.pos:])))
	_, err := dec.Token()
	for err == nil {
		if !dec.More() {
			_, err = dec.Token()
			if err == nil {
				// The scanner and encoding/json disagree; say so
				// rather than guess.
				return &Error{ReasonMalformedJSON, fmt.Sprintf("body is not valid JSON in item %d", i)}
			}
			break
		}
		err = dec.Decode(&discard{})
	}
	return streamError(dec, fmt.Sprintf("in item %d", i), err)
}
