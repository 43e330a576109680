package kafka

import "bytes"

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
	b := s.b
	i := skipWS(b, s.i)
	if i < len(b) && b[i] == '}' {
		s.i = i + 1
		s.bad = s.bad || skipWS(b, s.i) != len(b) // trailing bytes
		return nil, false, 0, 0, false
	}
	if s.keys > 0 {
		if i >= len(b) || b[i] != ',' {
			return s.fail()
		}
		i = skipWS(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		return s.fail()
	}
	kend, esc := skipString(b, i)
	if kend < 0 {
		return s.fail()
	}
	key = b[i+1 : kend-1]
	i = skipWS(b, kend)
	if i >= len(b) || b[i] != ':' {
		return s.fail()
	}
	start = skipWS(b, i+1)
	if end = skipValue(b, start); end < 0 {
		return s.fail()
	}
	s.i = end
	s.keys++
	return key, esc, start, end, true
}

func (s *topScanner) fail() ([]byte, bool, int, int, bool) {
	s.bad = true
	return nil, false, 0, 0, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset after the string whose quote is at b[i]
// (-1 if it does not end) and whether it holds an escape.
func skipString(b []byte, i int) (int, bool) {
	escaped := false
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1, false
		}
		if k := bytes.IndexByte(b[i:i+j], '\\'); k >= 0 {
			escaped = true
			// Step over escapes one at a time up to the quote.
			p := i + k
			for p < i+j {
				if b[p] == '\\' {
					p += 2
				} else {
					p++
				}
			}
			if p > i+j {
				// The quote is escaped.
				i = p
				continue
			}
		}
		return i + j + 1, escaped
	}
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
