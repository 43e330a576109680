package test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/testdir"
)

// runSunset runs the binary to its end and returns its exit code, stdout
// and stderr.
func runSunset(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sunsetBin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("running sunset %v: %v", args, err)
	return 0, "", ""
}

// filledStores are two data directories of the same 20 acknowledged
// batches: one of a server killed with SIGKILL (its commits in the
// write-ahead log), one of a server stopped with SIGTERM (its commits in
// tables).
func filledStores(t *testing.T) (killed, stopped string) {
	t.Helper()
	killed, stopped = t.TempDir(), t.TempDir()
	for dir, sig := range map[string]syscall.Signal{killed: syscall.SIGKILL, stopped: syscall.SIGTERM} {
		p := startBinary(t, dir)
		acked := sendConcurrently(p.url, time.Now().UTC(), 20, func(int64) {})
		for i, ok := range acked {
			require.True(t, ok, "batch %d", i)
		}
		require.NoError(t, p.cmd.Process.Signal(sig))
		<-p.exited
	}
	return killed, stopped
}

// Sunset refuses to start over a damaged data directory, names it and says
// what to do; sunset store verify says what is damaged. Neither changes a
// file.
func TestDamagedDataDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	killed, stopped := filledStores(t)
	for _, dir := range []string{killed, stopped} {
		code, out, _ := runSunset(t, "store", "verify", "--data-dir", dir)
		require.Equal(t, 0, code, out)
		require.True(t, strings.HasSuffix(out, "healthy\n"), out)
	}

	for _, tc := range []struct {
		name   string
		from   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"MANIFEST deleted", killed, func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "MANIFEST")))
		}, "MANIFEST is missing, but the directory holds Sunset's marker and 2 log files: badger would start over them, empty or with part of the data"},
		{"MANIFEST overwritten", stopped, func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("not a manifest at all"), 0o600))
		}, "MANIFEST is damaged: manifest has bad magic"},
		{"table deleted", stopped, func(t *testing.T, dir string) {
			tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
			require.NoError(t, err)
			require.Len(t, tables, 1)
			require.NoError(t, os.Remove(tables[0]))
		}, "table 000001.sst (level 0), listed in the MANIFEST, is missing"},
		{"write-ahead log cut short", killed, func(t *testing.T, dir string) {
			// Halfway through what was written: the file is preallocated,
			// and its zeros hold nothing.
			wal := filepath.Join(dir, "00001.mem")
			b, err := os.ReadFile(wal)
			require.NoError(t, err)
			written := len(bytes.TrimRight(b, "\x00"))
			// Each request's dedupe mark alone is an 8-byte hash.
			require.Greater(t, written, 20*100*8, "20 batches of 100 requests are in the log")
			require.NoError(t, os.Truncate(wal, int64(written/2)))
		}, "00001.mem (write-ahead log) ends inside a record at byte "},
		{"value log cut short", stopped, func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, "000001.vlog"), 7))
		}, "000001.vlog (value log) is 7 bytes, shorter than its 20-byte header: it was cut short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testdir.Copy(t, tc.from)
			tc.damage(t, dir)
			before := testdir.Contents(t, dir)

			code, _, stderr := runSunset(t, "serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--log-format", "json")
			require.Equal(t, 1, code, stderr)
			require.True(t, strings.HasPrefix(stderr, "Error: store: the data directory "+dir+" is damaged: "+tc.want), stderr)
			require.True(t, strings.HasSuffix(stderr, ". Sunset does not start over it, so that nothing more is lost: keep a copy of the directory, run `sunset store verify --data-dir "+dir+
				"`, and follow \"Recovering a damaged store\" in docs/operations.md\n"), stderr)

			code, stdout, stderr := runSunset(t, "store", "verify", "--data-dir", dir)
			require.Equal(t, 2, code)
			require.Contains(t, stdout, "\nDAMAGED: "+tc.want)
			require.Equal(t, "Error: "+dir+" is damaged; keep a copy of it and see \"Recovering a damaged store\" in docs/operations.md\n", stderr)

			// A report reads the directory read-only, and refuses it too.
			code, _, stderr = runSunset(t, "report", "--data-dir", dir)
			require.Equal(t, 1, code)
			require.Contains(t, stderr, "is damaged: "+tc.want)
			require.Equal(t, before, testdir.Contents(t, dir), "nothing was changed")
		})
	}

	// A crash between badger creating a log and sizing it leaves the log
	// empty: verify names it, a read-only report refuses it and says what
	// to do, and serve removes it.
	emptyLog := filepath.Join(killed, "00077.mem")
	require.NoError(t, os.WriteFile(emptyLog, nil, 0o644))
	code, out, _ := runSunset(t, "store", "verify", "--data-dir", killed)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "\nempty: 00077.mem is 0 bytes (a crash came before badger sized it) and holds nothing; serve removes it at the next start\nhealthy\n")
	code, _, stderr := runSunset(t, "report", "--data-dir", killed)
	require.Equal(t, 1, code)
	require.Equal(t, "Error: store: "+killed+" holds 1 log file that a crash left empty (00077.mem), which badger cannot open beside; a read-only open changes nothing: start `sunset serve` on the directory once, which removes it\n", stderr)

	// The undamaged directories serve every acknowledged batch.
	for _, dir := range []string{killed, stopped} {
		p := startBinary(t, dir)
		if dir == killed {
			require.NoFileExists(t, emptyLog)
			p.logged.mu.Lock()
			require.Equal(t, 1, p.logged.count["removed an empty log that a crash left before badger sized it; it held nothing"])
			p.logged.mu.Unlock()
			require.Contains(t, p.stderr.String(), `"file":"00077.mem"`)
		}
		got := counts(t, p.url)
		require.Len(t, got, 20)
		for i := 0; i < 20; i++ {
			require.Equal(t, int64(100), got[apiName(i)])
		}
		code, _, stderr := runSunset(t, "store", "verify", "--data-dir", dir)
		require.Equal(t, 1, code)
		require.Equal(t, "Error: store: "+dir+" is in use by another Sunset process (badger holds its lock): Cannot acquire directory lock on \""+dir+"\": resource temporarily unavailable\n", stderr)
	}
}
