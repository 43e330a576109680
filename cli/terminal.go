package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/cli-runtime/pkg/printers"
)

// Terminal makes a string from audit data safe to print in a table: every
// such string (user names, user agents, node, cluster, API and webhook
// names, verbs, workloads) is chosen by whoever sent the request, and an
// escape sequence, carriage return, tab or newline in it would reach the
// terminal of the admin who reads the report, where it could clear the
// screen or forge a row.
//
// Escape and carriage return are written as kubectl writes them
// (printers.EscapeTerminal: ^[ and \r); the other C0 and C1 control
// characters, DEL, bytes that are not UTF-8 and the bidirectional
// formatting characters, which reorder what follows them, are written as
// Go escapes (\t, \n, \x00, \u009b, \u202e). Like kubectl's, it is for
// reading, not reversible; JSON and YAML output stay exact.
func Terminal(s string) string {
	if !needsEscape(s) {
		return s
	}
	s = printers.EscapeTerminal(s)
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether Terminal changes s; most strings are plain
// ASCII and are returned as they are.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return !plainUTF8(s[i:])
		}
	}
	return false
}

// plainUTF8 reports whether s, from its first non-ASCII or control byte
// on, holds only printable ASCII and valid UTF-8 without control or
// formatting characters.
func plainUTF8(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r < 0x20 || r == 0x7f || isControl(r) {
			return false
		}
		i += size
	}
	return true
}

// isControl reports C1 controls (U+0080 to U+009F, among them the one-byte
// CSI U+009B that some terminals obey) and the bidirectional formatting
// characters.
func isControl(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// terminalCells escapes each cell of a table row in place and returns it.
func terminalCells(cells []string) []string {
	for i, c := range cells {
		cells[i] = Terminal(c)
	}
	return cells
}
