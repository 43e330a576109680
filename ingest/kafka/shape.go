package kafka

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// A light walk over a message's top-level object: where each key's value
// starts and ends, without decoding or validating the values. It only tells
// which shape a message has; whatever is then counted is decoded (and so
// validated) by encoding/json or by the pre-filter, which validates as it
// goes.

// topScanner walks the keys of the object at the start of b.
type topScanner struct {
	b []byte
	i int
	// keys is how many keys were walked.
	keys int
	// bad is set once the walk met something that is not JSON.
	bad bool
}

// openTop starts a walk. It reports false, with null true for a bare
// null, when b does not start with an object.
func openTop(b []byte) (s topScanner, null, ok bool) {
	i := skipWS(b, 0)
	if i < len(b) && b[i] == '{' {
		return topScanner{b: b, i: i + 1}, false, true
	}
	rest := bytes.TrimRight(b[i:], " \t\r\n")
	return topScanner{}, string(rest) == "null", false
}

// next returns the next key (its raw bytes between the quotes, and whether
// they hold an escape) and where its value lies. ok is false at the end of
// the object, or when the walk fails (bad is then set).
func (s *topScanner) next() (key []byte, escaped bool, start, end int, ok bool) {
	if key, escaped, start, ok = s.nextKey(); !ok {
		return nil, false, 0, 0, false
	}
	end = skipValue(s.b, start)
	return key, escaped, start, end, s.valueEnds(end)
}

// nextKey is next up to where the value starts; the caller finds where it
// ends and hands that to valueEnds before the next key.
func (s *topScanner) nextKey() (key []byte, escaped bool, start int, ok bool) {
	b := s.b
	i := skipWS(b, s.i)
	if i < len(b) && b[i] == '}' {
		s.i = i + 1
		s.bad = s.bad || skipWS(b, s.i) != len(b) // trailing bytes
		return nil, false, 0, false
	}
	if s.keys > 0 {
		if i >= len(b) || b[i] != ',' {
			return s.failKey()
		}
		i = skipWS(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		return s.failKey()
	}
	kend, esc := skipString(b, i)
	if kend < 0 {
		return s.failKey()
	}
	key = b[i+1 : kend-1]
	i = skipWS(b, kend)
	if i >= len(b) || b[i] != ':' {
		return s.failKey()
	}
	return key, esc, skipWS(b, i+1), true
}

// valueEnds moves the walk past a value that ends at end (-1: it does not
// end), and reports whether the walk goes on.
func (s *topScanner) valueEnds(end int) bool {
	if end < 0 {
		s.bad = true
		return false
	}
	s.i = end
	s.keys++
	return true
}

func (s *topScanner) failKey() ([]byte, bool, int, bool) {
	s.bad = true
	return nil, false, 0, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset after the string whose quote is at b[i]
// (-1 if it does not end) and whether it holds an escape. A string
// envelope holds an escaped event, a backslash every few bytes, so it
// looks for the next quote or backslash eight bytes at a time.
func skipString(b []byte, i int) (int, bool) {
	escaped := false
	i++
	for i < len(b) {
		i = nextQuoteOrBackslash(b, i)
		if i >= len(b) {
			break
		}
		if b[i] == '"' {
			return i + 1, escaped
		}
		escaped = true
		i += 2 // the backslash and the byte it escapes
	}
	return -1, false
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// nextQuoteOrBackslash is the offset of the first quote or backslash in b
// from i on, or len(b).
func nextQuoteOrBackslash(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := quoteOrBackslash(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b) && b[i] != '"' && b[i] != '\\'; i++ {
	}
	return i
}

// quoteOrBackslash marks, in the high bit of its byte, each of x's 8 bytes
// that is a quote or a backslash. The lowest mark is exact (a borrow may
// add false ones above it), so only the lowest is used.
func quoteOrBackslash(x uint64) uint64 {
	quote := x ^ (lsb * '"')
	backslash := x ^ (lsb * '\\')
	return ((quote-lsb)&^quote | (backslash-lsb)&^backslash) & msb
}

// skipValue returns the offset after the value at b[i], or -1. Strings,
// objects and arrays are matched; numbers and literals run to the next
// delimiter.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, _ := skipString(b, i)
				if end < 0 {
					return -1
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	case ',', '}', ']', ':':
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j
		}
		j++
	}
	return j
}
