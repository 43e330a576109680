package auditjson

// The pre-filter's scanner, for the envelopes other packages read (an AKS
// diagnostic record, a shipper's wrapper): it validates as it walks, as
// encoding/json would, and decodes nothing. Every function returns -1
// where encoding/json would fail. depth counts the container walked and
// those around it, for encoding/json's nesting limit.

// WalkObject walks the object whose brace is at b[i] and returns the offset
// after it. member gets each key (its raw bytes between the quotes),
// whether the key is plain (ASCII without escapes: its bytes are its
// name) and where the value starts; it returns the offset after the value,
// from SkipValue, or -1.
func WalkObject(b []byte, i, depth int, member func(key []byte, plain bool, start int) int) int {
	return scanObject(b, i, depth, func(key []byte, flags stringFlags, start int) int {
		return member(key, flags.plain(), start)
	})
}

// WalkArray walks the array whose bracket is at b[i] and returns the
// offset after it. element gets where each element starts and returns the
// offset after it, or -1.
func WalkArray(b []byte, i, depth int, element func(start int) int) int {
	return scanArray(b, i, depth, element)
}

// SkipValue returns the offset after the value at b[i], or -1; depth
// counts the containers around it.
func SkipValue(b []byte, i, depth int) int { return skipValue(b, i, depth) }

// KeyFolds reports whether the plain key matches the lowercase name as
// encoding/json matches keys to fields: ignoring case.
func KeyFolds(key []byte, lower string) bool { return equalFoldASCII(key, lower) }

// StringAt decodes the JSON string at b[start] as encoding/json would and
// returns the offset after it, or -1 if there is none. A string whose
// bytes are its value, the usual case, is not decoded at all.
func StringAt(b []byte, start int) (string, int) { return stringAt(b, start) }

// ReadString reads the string or null at b[start] into dst, as
// encoding/json does: null leaves dst as it was. It returns the offset
// after the value, or -1 for any other type.
func ReadString(b []byte, start int, dst *string) int { return readString(b, start, dst) }

// ReadStrings reads the array of strings or null at b[start] into dst:
// null makes it nil, an empty array empty. depth counts the array and the
// containers around it.
func ReadStrings(b []byte, start, depth int, dst *[]string) int {
	return readStrings(b, start, depth, dst)
}

// Literal returns the offset after lit (null, true or false) at b[i], or
// -1 if another value is there.
func Literal(b []byte, i int, lit string) int { return scanLiteral(b, i, lit) }
