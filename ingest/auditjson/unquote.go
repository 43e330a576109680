package auditjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kube-sunset/sunset/countkey"
)

// stringIs reports whether the string or null at b[start] is want, and
// returns the offset after it, or -1. It allocates nothing.
func stringIs(b []byte, start int, want string) (int, bool) {
	if at(b, start) == 'n' {
		return scanLiteral(b, start, "null"), want == ""
	}
	if at(b, start) != '"' {
		return -1, false
	}
	end, flags := scanString(b, start)
	if end < 0 {
		return -1, false
	}
	raw := b[start+1 : end-1]
	if flags.plain() || len(raw) > 6*len(want)+6 {
		return end, string(raw) == want
	}
	var buf [16]byte
	v, cut := unquote(buf[:0], raw, len(want))
	return end, !cut && string(v) == want
}

// stringArray walks the array of strings or null at b[start], depth
// counting it and the containers around it, and hands element each
// element's index and start; element returns the offset after it. An
// element that is not a string or null ends the walk with the type error
// encoding/json would give, and so does a value that is not an array or
// null. It returns the offset after the value, or -1.
func stringArray(b []byte, start, depth int, element func(index, start int) int) (int, error) {
	switch at(b, start) {
	case 'n':
		return scanLiteral(b, start, "null"), nil
	case '[':
	default:
		return -1, typeError(b[start:], sliceType)
	}
	var err error
	n := 0
	end := scanArray(b, start, depth, func(i int) int {
		if c := at(b, i); c != '"' && c != 'n' {
			err = typeError(b[i:], stringType)
			return -1
		}
		n++
		return element(n-1, i)
	})
	return end, err
}

// unmarshalArray is UnmarshalJSON by read: b is valid JSON, which
// encoding/json has checked.
func unmarshalArray(b []byte, read func(b []byte, start, depth int) (int, error)) error {
	end, err := read(b, 0, 1)
	if err != nil {
		return err
	}
	return scanned(end)
}

// errScanner is the error of a value encoding/json accepted and the
// scanner did not: FuzzScanner holds them to agree.
var errScanner = errors.New("auditjson: the scanner refused a valid JSON value")

// scanned is the error of an UnmarshalJSON that walked its value to end.
func scanned(end int) error {
	if end < 0 {
		return errScanner
	}
	return nil
}

var (
	stringType = reflect.TypeFor[string]()
	sliceType  = reflect.TypeFor[[]string]()
	mapType    = reflect.TypeFor[map[string]json.RawMessage]()
)

// typeError is encoding/json's error for the value b decoded into t.
func typeError(b []byte, t reflect.Type) error {
	value := "number"
	switch at(b, 0) {
	case '"':
		value = "string"
	case '{':
		value = "object"
	case '[':
		value = "array"
	case 't', 'f':
		value = "bool"
	}
	return &json.UnmarshalTypeError{Value: value, Type: t}
}

// boundedString decodes the JSON string at b[start] as encoding/json
// would, keeping at most max bytes of it, cut at a character boundary,
// and returns the offset after it (-1 if there is none) and whether it
// was cut. Only what is kept is ever copied.
func boundedString(b []byte, start, max int) (s string, end int, cut bool) {
	if at(b, start) != '"' {
		return "", -1, false
	}
	end, flags := scanString(b, start)
	if end < 0 {
		return "", -1, false
	}
	raw := b[start+1 : end-1]
	if flags&flagEscaped == 0 && (flags&flagNonASCII == 0 || utf8.Valid(raw)) {
		// Its bytes are its value.
		if len(raw) <= max {
			return intern(raw), end, false
		}
		n := max
		for n > 0 && !utf8.RuneStart(raw[n]) {
			n--
		}
		return string(raw[:n]), end, true
	}
	v, cut := unquote(make([]byte, 0, min(len(raw), max+utf8.UTFMax)), raw, max)
	if cut {
		return countkey.Truncate(string(v), max), end, true
	}
	return string(v), end, false
}

// unquote appends to dst the value of the JSON string whose content (the
// bytes between its quotes, valid as scanString checks) is s, as
// encoding/json decodes it: escapes resolved, invalid UTF-8 and lone
// surrogates replaced by U+FFFD. It stops once more than max bytes are
// appended, and says so (cut).
func unquote(dst, s []byte, max int) (_ []byte, cut bool) {
	base := len(dst)
	for r := 0; r < len(s) && len(dst)-base <= max; {
		switch c := s[r]; {
		case c == '\\' && r+1 < len(s):
			switch s[r+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						dst = utf8.AppendRune(dst, dec)
						r += 6
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default:
				// '"', '\\' and '/' stand for themselves.
				dst = append(dst, s[r+1])
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst, len(dst)-base > max
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
