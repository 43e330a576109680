package file

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type gotLine struct {
	n       int
	text    string
	tooLong bool
}

func collect(t *testing.T, in Input, stdin string, limit int) ([]gotLine, int64) {
	t.Helper()
	var got []gotLine
	var read atomic.Int64
	err := readLines(in, strings.NewReader(stdin), &read, limit, func(l Line) error {
		got = append(got, gotLine{l.Number, string(l.Bytes), l.TooLong})
		return nil
	})
	require.NoError(t, err)
	return got, read.Load()
}

func TestReadLines(t *testing.T) {
	dir := t.TempDir()
	huge := `{"stage":"ResponseComplete","userAgent":"` + strings.Repeat("x", 1<<20) + `"}`
	content := "{\"a\":1}\n\n  {\"b\":2}  \r\n" + huge + "\n{\"last\":true}"
	plain := filepath.Join(dir, "audit.log")
	require.NoError(t, os.WriteFile(plain, []byte(content), 0o600))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(content))
	require.NoError(t, zw.Close())
	// Rotated files are gzip whatever their name: detected by magic bytes.
	rotated := filepath.Join(dir, "audit-2026-11-21.log")
	require.NoError(t, os.WriteFile(rotated, gz.Bytes(), 0o600))

	want := []gotLine{{1, `{"a":1}`, false}, {3, `{"b":2}`, false}, {4, huge, false}, {5, `{"last":true}`, false}}
	got, read := collect(t, Input{Name: plain}, "", MaxLineBytes)
	require.Equal(t, want, got, "blank lines are skipped but numbered; no line limit at 64 KiB")
	require.Equal(t, int64(len(content)), read)
	got, read = collect(t, Input{Name: rotated}, "", MaxLineBytes)
	require.Equal(t, want, got)
	require.Equal(t, int64(gz.Len()), read, "progress counts bytes on disk")
	got, _ = collect(t, Input{Name: Stdin}, content, MaxLineBytes)
	require.Equal(t, want, got)

	// Past the limit a line is reported, not kept, and reading goes on.
	got, _ = collect(t, Input{Name: plain}, "", 1<<16)
	require.Equal(t, []gotLine{{1, `{"a":1}`, false}, {3, `{"b":2}`, false}, {4, "", true}, {5, `{"last":true}`, false}}, got)
}

func TestExpandWalksDirectoriesInOrder(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.log", "a.log.gz", ".hidden", "sub/c.log", ".git/config"} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("{}\n"), 0o600))
	}
	inputs, err := Expand([]string{dir, Stdin})
	require.NoError(t, err)
	require.Equal(t, []Input{
		{Name: filepath.Join(dir, "a.log.gz"), Size: 3},
		{Name: filepath.Join(dir, "b.log"), Size: 3},
		{Name: filepath.Join(dir, "sub/c.log"), Size: 3},
		{Name: Stdin},
	}, inputs)
	_, err = Expand([]string{filepath.Join(dir, "missing")})
	require.ErrorContains(t, err, "no such file or directory")
}

func TestProgressLine(t *testing.T) {
	require.Equal(t, "[============>           ]  50%  1.0 MiB / 2.0 MiB  1000 events  500 events/s",
		ProgressLine(1<<20, 2<<20, 1000, 2*time.Second))
	require.Equal(t, "[========================] 100%  2.0 MiB / 2.0 MiB  10 events  10 events/s",
		ProgressLine(2<<20, 2<<20, 10, time.Second))
	require.Equal(t, "512 B  3 events  0 events/s", ProgressLine(512, 0, 3, 0), "stdin: size unknown")
}
