package auditjson

import (
	"encoding/binary"
	"math/bits"
)

// The scanner below walks JSON without decoding it: it finds where values
// end and what an event's top-level keys are, so that an event that cannot
// count is set aside without being decoded.
//
// It accepts only what encoding/json accepts (a stricter scanner would just
// send more input down the exact path, a looser one would let invalid input
// through), so every function returns -1 where encoding/json would fail, and
// callers then hand the input to encoding/json for its exact error.

// maxScanDepth is encoding/json's nesting limit.
const maxScanDepth = 10000

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// stringFlags says what a string held that makes its raw bytes differ from
// its decoded value, or that encoding/json may fold onto an ASCII key.
type stringFlags uint8

const (
	flagEscaped stringFlags = 1 << iota
	flagNonASCII
)

// plain is a string whose raw bytes are its value, all ASCII.
func (f stringFlags) plain() bool { return f == 0 }

// specials marks, in the high bit of its byte, each of x's 8 bytes that
// ends or escapes a string or is not allowed in one: a quote, a backslash
// or a control character. The lowest mark is exact; a borrow may add false
// ones above it, which is why only the lowest is used.
//
// Flipping bit 1 moves the quote (0x22) to 0x20 and keeps the control
// characters below 0x20 (and 0x20 itself at 0x22): one test for "below
// 0x21" then finds both, where a test each cost a third more a word.
func specials(x uint64) uint64 {
	low := x ^ (lsb * 0x02)
	backslash := x ^ (lsb * '\\')
	// Bytes of 0x80 and more never mark: ^low and ^backslash mask them out.
	return ((low-lsb*0x21)&^low | (backslash-lsb)&^backslash) & msb
}

// scanString returns the offset after the string whose opening quote is at
// b[i], and what it held; -1 if it is not a valid string.
func scanString(b []byte, i int) (int, stringFlags) {
	i++
	// Eight bytes at a time up to the first special or non-ASCII byte:
	// most strings end there, at their quote, plain. A non-ASCII byte
	// goes on in scanStringRest, which keeps account of it.
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		m := specials(x) | x&msb
		if m == 0 {
			i += 8
			continue
		}
		n := bits.TrailingZeros64(m) / 8
		i += n
		if byte(x>>(8*n)) == '"' {
			return i + 1, 0
		}
		break
	}
	return scanStringRest(b, i, 0)
}

// skipString is scanString for a value, whose flags nobody reads.
func skipString(b []byte, i int) int {
	i++
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		m := specials(x)
		if m == 0 {
			i += 8
			continue
		}
		n := bits.TrailingZeros64(m) / 8
		i += n
		if byte(x>>(8*n)) == '"' {
			return i + 1
		}
		break
	}
	end, _ := scanStringRest(b, i, 0)
	return end
}

// scanStringRest is scanString from b[i], inside the string, past bytes
// whose bits are high's: it takes escapes, control characters and the
// string's last bytes.
func scanStringRest(b []byte, i int, high uint64) (int, stringFlags) {
	var flags stringFlags
	for {
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			m := specials(x)
			if m == 0 {
				high |= x
				i += 8
				continue
			}
			n := bits.TrailingZeros64(m) / 8
			high |= x & (1<<(8*n) - 1)
			i += n
			break
		}
		if i >= len(b) {
			return -1, 0
		}
		switch c := b[i]; {
		case c == '"':
			if high&msb != 0 {
				flags |= flagNonASCII
			}
			return i + 1, flags
		case c == '\\':
			flags |= flagEscaped
			if i+1 >= len(b) {
				return -1, 0
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1, 0
				}
				i += 6
			default:
				return -1, 0
			}
		case c < 0x20:
			return -1, 0
		default:
			high |= uint64(c)
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanNumber returns the offset after the number starting at b[i], or -1.
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i
}

// scanLiteral returns the offset after lit at b[i], or -1.
func scanLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// skipValue returns the offset after the value that starts at b[i] (no
// whitespace before it), or -1 if there is no valid value there. depth is
// how many arrays and objects enclose it.
//
// Containers inside it are walked in one loop rather than by a call per
// value: a call costs about as much as scanning a short string, and an
// event has a hundred values. open holds, innermost in the lowest bit,
// whether each open container is an object; one nested deeper than the
// word holds is walked by scanObject or scanArray.
func skipValue(b []byte, i, depth int) int {
	var open uint64
	level := 0
	for {
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; c {
		case '"':
			i = skipString(b, i)
		case '{', '[':
			if depth+level+1 > maxScanDepth {
				return -1
			}
			if level == 64 {
				if c == '{' {
					i = scanObject(b, i, depth+level+1, nil)
				} else {
					i = scanArray(b, i, depth+level+1, nil)
				}
				break
			}
			i = skipSpace(b, i+1)
			if i >= len(b) {
				return -1
			}
			if c == '{' {
				if b[i] == '}' {
					i++
					break
				}
				open, level = open<<1|1, level+1
				if i = skipKey(b, i); i < 0 {
					return -1
				}
				continue
			}
			if b[i] == ']' {
				i++
				break
			}
			open, level = open<<1, level+1
			continue
		case 't':
			i = scanLiteral(b, i, "true")
		case 'f':
			i = scanLiteral(b, i, "false")
		case 'n':
			i = scanLiteral(b, i, "null")
		default:
			if c != '-' && !isDigit(c) {
				return -1
			}
			i = scanNumber(b, i)
		}
		// After a value: the end of this one, or what follows it in
		// the container it is in.
		for {
			if i < 0 {
				return -1
			}
			if level == 0 {
				return i
			}
			if i = skipSpace(b, i); i >= len(b) {
				return -1
			}
			object := open&1 != 0
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				if object {
					i = skipKey(b, i)
				}
				break
			}
			if object && b[i] != '}' || !object && b[i] != ']' {
				return -1
			}
			i++
			open, level = open>>1, level-1
		}
		if i < 0 {
			return -1
		}
	}
}

// skipKey returns where the value of the member whose key starts at b[i]
// starts, past the key, the colon and the spaces around it; -1 if there
// is no key and colon there.
func skipKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = skipString(b, i); i < 0 {
		return -1
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// scanObject returns the offset after the object whose brace is at b[i],
// or -1; depth counts it and the containers around it. It hands each
// member to member, if not nil: the key (raw, between its quotes), its
// flags and where the value starts. member scans the value and returns
// the offset after it, or -1.
func scanObject(b []byte, i, depth int, member func(key []byte, flags stringFlags, start int) int) int {
	if depth > maxScanDepth {
		return -1
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		keyStart := i + 1
		keyEnd, flags := scanString(b, i)
		if keyEnd < 0 {
			return -1
		}
		i = skipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		start := skipSpace(b, i+1)
		var end int
		if member != nil {
			end = member(b[keyStart:keyEnd-1], flags, start)
		} else {
			end = skipValue(b, start, depth)
		}
		// Compact JSON, as kube-apiserver writes it, has the comma or
		// the brace right after the value: no call to find it.
		if end >= 0 && end < len(b) && b[end] == ',' && end+1 < len(b) && b[end+1] == '"' {
			i = end + 1
			continue
		}
		var closed bool
		if i, closed = afterMember(b, end, '}'); i < 0 || closed {
			return i
		}
	}
}

// afterMember reads what follows a member or element that ends at end: a
// comma (i is then the start of the next), or the container's closing
// bracket (closed, and i is the offset after it). i is -1 on anything else.
func afterMember(b []byte, end int, closing byte) (i int, closed bool) {
	if end < 0 {
		return -1, false
	}
	i = skipSpace(b, end)
	switch {
	case i >= len(b):
		return -1, false
	case b[i] == ',':
		return skipSpace(b, i+1), false
	case b[i] == closing:
		return i + 1, true
	}
	return -1, false
}

// skipArray returns the offset after the array whose bracket is at b[i], or
// -1; depth counts it and the containers around it.
func skipArray(b []byte, i, depth int) int { return scanArray(b, i, depth, nil) }

// scanArray is skipArray that hands each element's start to element, if
// not nil, which scans it and returns the offset after it, or -1.
func scanArray(b []byte, i, depth int, element func(start int) int) int {
	if depth > maxScanDepth {
		return -1
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	for {
		var end int
		if element != nil {
			end = element(i)
		} else {
			end = skipValue(b, i, depth)
		}
		var closed bool
		if i, closed = afterMember(b, end, ']'); i < 0 || closed {
			return i
		}
	}
}

// equalFoldASCII reports whether key, ASCII, equals lower (lowercase ASCII)
// ignoring case, as encoding/json matches keys to fields.
//
// The first bytes are tried inline: most keys an event's walk compares
// differ there, and a call costs more than the test. Setting bit 0x20 of
// both folds an ASCII letter and never parts two equal bytes.
func equalFoldASCII(key []byte, lower string) bool {
	return len(key) == len(lower) && (len(key) == 0 || key[0]|0x20 == lower[0]|0x20) && hasPrefixFoldASCII(key, lower)
}
