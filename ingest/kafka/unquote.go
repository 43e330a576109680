package kafka

import (
	"unicode/utf16"
	"unicode/utf8"
)

// unquote appends to dst the value of the JSON string raw, quotes included,
// in one pass and without allocating when dst has room: a shipper's string
// envelope ({"log":"<event>"}) holds the event escaped, and this is its
// unescaping on the hot path.
//
// It reports false for anything whose value it cannot be sure matches
// encoding/json's: not a string, a control character, invalid UTF-8 or a
// lone surrogate (which encoding/json replaces with U+FFFD). The caller
// then lets encoding/json decide.
func unquote(dst, raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return dst, false
	}
	s := raw[1 : len(raw)-1]
	run := 0 // start of the bytes not yet copied
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= ' ' && c != '"' && c != '\\' && c < utf8.RuneSelf:
			i++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, false
			}
			i += size
		case c == '\\' && i+1 < len(s):
			dst = append(dst, s[run:i]...)
			var n int
			if dst, n = unescape(dst, s[i:]); n == 0 {
				return dst, false
			}
			i += n
			run = i
		default:
			// A control character, a lone backslash or an unescaped
			// quote.
			return dst, false
		}
	}
	return append(dst, s[run:]...), true
}

// unescape appends the character that the escape at the start of s stands
// for and returns how many bytes it took, 0 when it is not one that
// unquote may decode.
func unescape(dst, s []byte) ([]byte, int) {
	switch s[1] {
	case '"', '\\', '/':
		return append(dst, s[1]), 2
	case 'b':
		return append(dst, '\b'), 2
	case 'f':
		return append(dst, '\f'), 2
	case 'n':
		return append(dst, '\n'), 2
	case 'r':
		return append(dst, '\r'), 2
	case 't':
		return append(dst, '\t'), 2
	case 'u':
		r := hex4(s[2:])
		switch {
		case r < 0:
			return dst, 0
		case utf16.IsSurrogate(r):
			if len(s) < 12 || s[6] != '\\' || s[7] != 'u' {
				return dst, 0
			}
			pair := utf16.DecodeRune(r, hex4(s[8:]))
			if pair == utf8.RuneError {
				return dst, 0
			}
			return utf8.AppendRune(dst, pair), 12
		}
		return utf8.AppendRune(dst, r), 6
	}
	return dst, 0
}

// hex4 is the value of the four hexadecimal digits at the start of s, or
// -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
