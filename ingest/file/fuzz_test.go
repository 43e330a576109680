package file

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// oracleLine is one line as a plain split on newlines sees it.
type oracleLine struct {
	text     []byte // without the newline
	complete bool   // a newline follows
}

func splitLines(data []byte) []oracleLine {
	var out []oracleLine
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, oracleLine{text: data})
			break
		}
		out = append(out, oracleLine{text: data[:i], complete: true})
		data = data[i+1:]
	}
	return out
}

// FuzzReadLines checks the line reader replay and follow share against a
// plain split on newlines: the same lines, numbers and sizes, lines over
// the limit reported as too long and never kept, whatever the buffer size.
// Seeded with captured audit log lines.
func FuzzReadLines(f *testing.F) {
	lines := ingesttest.CapturedLines(f, "../../testdata")
	for i := 0; i+3 <= len(lines); i += 3 {
		doc := bytes.Join(lines[i:i+3], []byte("\n"))
		f.Add(doc, uint16(1<<15))
		f.Add(append(doc, '\n'), uint16(len(lines[i])))
	}
	f.Add([]byte("{\"a\":1}\n\n  {\"b\":2}  \r\n{\"last\":true}"), uint16(10))
	f.Add([]byte("\n\n\n"), uint16(0))
	f.Add([]byte(""), uint16(5))

	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		want := splitLines(data)

		// The scanner with bufio's smallest buffer, so that long lines
		// take the gathering path.
		sc := newLineScanner(bufio.NewReaderSize(bytes.NewReader(data), 16), int(limit))
		var total int64
		for i := 0; ; i++ {
			l, err := sc.next()
			if errors.Is(err, io.EOF) {
				if i != len(want) {
					t.Fatalf("%d lines, want %d", i, len(want))
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if i >= len(want) {
				t.Fatalf("more than the %d lines", len(want))
			}
			w := want[i]
			size := int64(len(w.text))
			if w.complete {
				size++
			}
			tooLong := len(w.text) > int(limit)
			switch {
			case l.size != size || l.complete != w.complete || l.tooLong != tooLong:
				t.Fatalf("line %d: size %d complete %v too long %v, want %d %v %v", i+1, l.size, l.complete, l.tooLong, size, w.complete, tooLong)
			case tooLong && l.bytes != nil:
				t.Fatalf("line %d is too long but was kept", i+1)
			case !tooLong && !bytes.Equal(bytes.TrimSuffix(l.bytes, []byte{'\n'}), w.text):
				t.Fatalf("line %d: %q, want %q", i+1, l.bytes, w.text)
			}
			total += l.size
		}
		if total != int64(len(data)) {
			t.Fatalf("lines cover %d bytes of %d", total, len(data))
		}

		// Replay's reader numbers every line and passes the non-blank ones.
		if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			return // read as gzip
		}
		var got []Line
		err := readLines(Input{Name: Stdin}, bytes.NewReader(data), nil, int(limit), func(l Line) error {
			l.Bytes = bytes.Clone(l.Bytes)
			got = append(got, l)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var wantLines []Line
		for i, w := range want {
			switch {
			case len(w.text) > int(limit):
				wantLines = append(wantLines, Line{Input: Stdin, Number: i + 1, TooLong: true})
			case len(bytes.TrimSpace(w.text)) > 0:
				wantLines = append(wantLines, Line{Input: Stdin, Number: i + 1, Bytes: bytes.TrimSpace(w.text)})
			}
		}
		if len(got) != len(wantLines) {
			t.Fatalf("%d lines passed on, want %d", len(got), len(wantLines))
		}
		for i := range got {
			if got[i].Number != wantLines[i].Number || got[i].TooLong != wantLines[i].TooLong || !bytes.Equal(got[i].Bytes, wantLines[i].Bytes) {
				t.Fatalf("line passed on %+v, want %+v", got[i], wantLines[i])
			}
		}
	})
}
