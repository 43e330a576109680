package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// A crash between badger creating a log file and sizing it leaves the file
// at 0 bytes, and badger refuses to open beside it (the crash test met it
// under load). A writer removes it, says so, and keeps every count; a
// read-only open changes nothing and says what to do.
func TestEmptyLogsLeftByACrash(t *testing.T) {
	key := countkey.CountKey{Cluster: "c1", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", Verb: "get"}}
	count := func(s *Store) uint64 {
		var n uint64
		require.NoError(t, s.ScanCounts("c1", "endpoints.v1", hour19, hour19, func(_ countkey.CountKey, c uint64) error {
			n += c
			return nil
		}))
		return n
	}
	for _, empty := range []string{"00099.mem", "000099.vlog"} {
		t.Run(empty, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, hour19)
			_, err := s.Apply([]Request{{ID: "a", Key: key}, {ID: "b", Key: key}})
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.NoError(t, os.WriteFile(filepath.Join(dir, empty), nil, 0o644))

			_, err = Open(Options{Dir: dir, ReadOnly: true, Logger: zerolog.Nop()})
			require.EqualError(t, err, "store: "+dir+" holds 1 log file that a crash left empty ("+empty+"), which badger cannot open beside; "+
				"a read-only open changes nothing: start `sunset serve` on the directory once, which removes it")
			require.FileExists(t, filepath.Join(dir, empty))

			r, err := Verify(dir, true)
			require.NoError(t, err)
			require.True(t, r.Healthy(), r.Problems)
			require.Equal(t, []string{empty}, r.EmptyLogs)

			var logs bytes.Buffer
			s, err = Open(Options{Dir: dir, Logger: zerolog.New(zerolog.SyncWriter(&logs)).Level(zerolog.WarnLevel), Now: func() time.Time { return hour19 }})
			require.NoError(t, err)
			require.NoFileExists(t, filepath.Join(dir, empty))
			require.Equal(t, uint64(2), count(s))
			dup, err := s.Apply([]Request{{ID: "a", Key: key}, {ID: "c", Key: key}})
			require.NoError(t, err)
			require.Equal(t, []bool{true, false}, dup, "the dedupe marks survive")
			require.NoError(t, s.Close())
			require.Equal(t, `{"level":"warn","component":"store","file":"`+empty+`","message":"removed an empty log that a crash left before badger sized it; it held nothing"}`+"\n", logs.String())

			s = openTest(t, dir, hour19)
			defer s.Close()
			require.Equal(t, uint64(3), count(s))
		})
	}
}
