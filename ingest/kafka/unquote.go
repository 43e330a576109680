package kafka

import (
	"encoding/binary"
	"unicode/utf16"
	"unicode/utf8"
)

// unquoteAt appends to dst the value of the JSON string whose opening
// quote is at b[i], in one pass and without allocating when dst has room:
// a shipper's string envelope ({"log":"<event>"}) holds the event escaped,
// and this is its unescaping on the hot path. It also finds where the
// string ends: end is the offset after its closing quote, as skipString
// finds it, also when ok is false (-1 when there is none), so a walk over
// a message unescapes its envelope as it steps over it.
//
// ok is false for anything whose value it cannot be sure matches
// encoding/json's: not a string, a control character, invalid UTF-8 or a
// lone surrogate (which encoding/json replaces with U+FFFD). The caller
// then lets encoding/json decide.
func unquoteAt(dst, b []byte, i int) (_ []byte, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return dst, skipValue(b, i), false
	}
	decline := func() ([]byte, int, bool) {
		end, _ := skipString(b, i)
		return dst, end, false
	}
	i++
	run := i // start of the bytes not yet copied
	for i < len(b) {
		// Eight plain ASCII bytes at a time: nothing to escape, decode
		// or refuse in them.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if quoteOrBackslash(x)|unplain(x) != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return append(dst, b[run:i]...), i + 1, true
		case c >= ' ' && c != '\\' && c < utf8.RuneSelf:
			i++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return decline()
			}
			i += size
		case c == '\\' && i+1 < len(b):
			dst = append(dst, b[run:i]...)
			var n int
			if dst, n = unescape(dst, b[i:]); n == 0 {
				return decline()
			}
			i += n
			run = i
		default:
			// A control character, or a backslash at the end.
			return decline()
		}
	}
	return dst, -1, false
}

// unplain marks, in the high bit of its byte, each of x's 8 bytes that is
// a control character or not ASCII; any mark means some byte is one.
func unplain(x uint64) uint64 {
	return ((x-lsb*0x20)&^x | x) & msb
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
