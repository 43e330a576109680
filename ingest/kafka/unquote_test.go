package kafka

import (
	"encoding/json"
	"testing"
)

// unquote is unquoteAt of raw, a whole JSON string with its quotes: what
// these tests hold to encoding/json.
func unquote(dst, raw []byte) ([]byte, bool) {
	out, end, ok := unquoteAt(dst, raw, 0)
	return out, ok && end == len(raw)
}

// FuzzUnquote checks unquote against encoding/json: whenever unquote
// decodes a value, encoding/json decodes the same bytes to the same
// string; whenever it declines, the caller falls back, so only agreement
// matters. Plain, escaped and valid non-ASCII strings must not be declined.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{
		`""`, `"plain"`, `"{\"kind\":\"Event\"}\n"`, `"\/\b\f\n\r\t\\"`, `"\u00e9\u20ac\ud83d\ude00"`,
		`"é€😀"`, `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`, `"\u12"`, `"\x"`, "\"a\tb\"", `"a"b"`, `"\"`, `"\xff"`,
		`12`, `null`, `"\uFFFD"`, "\"\xef\xbf\xbd\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := unquote(nil, raw)
		var want string
		err := json.Unmarshal(raw, &want)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("unquote(%q) = %q, but encoding/json fails: %v", raw, got, err)
		}
		if string(got) != want {
			t.Fatalf("unquote(%q) = %q, encoding/json %q", raw, got, want)
		}
	})
}

// TestUnquoteDecodesWhatShippersWrite: the escapes fluent-bit and Vector
// write are decoded, not declined, and the value is appended to dst.
func TestUnquoteDecodesWhatShippersWrite(t *testing.T) {
	for raw, want := range map[string]string{
		`"{\"kind\":\"Event\",\"user\":{\"username\":\"jos\u00e9\"}}\n"`: "{\"kind\":\"Event\",\"user\":{\"username\":\"josé\"}}\n",
		`"\ud83d\ude00 \/ \t"`: "😀 / \t",
		`"ünïcode as is"`:      "ünïcode as is",
	} {
		got, ok := unquote([]byte("prefix:"), []byte(raw))
		if !ok || string(got) != "prefix:"+want {
			t.Errorf("unquote(%s) = %q, %v; want %q", raw, got, ok, "prefix:"+want)
		}
	}
	for _, raw := range []string{`"\ud83d"`, `"\xff"`, "\"\xff\"", "\"a\nb\"", `"a"b"`, `x`} {
		if got, ok := unquote(nil, []byte(raw)); ok {
			t.Errorf("unquote(%q) = %q; want it declined", raw, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		buf := make([]byte, 0, 64)
		_, _ = unquote(buf[:0], []byte(`"{\"kind\":\"Event\"}\u00e9"`))
	}); n != 0 {
		t.Errorf("unquote allocates %v times with room in dst; want 0", n)
	}
}
