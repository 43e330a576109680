package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A string's encoding escapes each NUL and ends with the terminator, and
// reads back as the string, with the bytes after it left.
func TestAppendStringEscapesNULs(t *testing.T) {
	for _, c := range []struct {
		s    string
		want []byte
	}{
		{"", []byte{0x00, 0x01}},
		{"ab", []byte{'a', 'b', 0x00, 0x01}},
		{"\x00", []byte{0x00, 0xFF, 0x00, 0x01}},
		{"a\x00\x00b\x00", []byte{'a', 0x00, 0xFF, 0x00, 0xFF, 'b', 0x00, 0xFF, 0x00, 0x01}},
	} {
		got := appendString([]byte{0x05}, c.s)
		require.Equal(t, append([]byte{0x05}, c.want...), got, "%q", c.s)
		s, rest, err := readString(append(got[1:], 'z'))
		require.NoError(t, err)
		require.Equal(t, c.s, s)
		require.Equal(t, []byte{'z'}, rest)
	}
}
