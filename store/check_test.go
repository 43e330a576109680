package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/testdir"
)

// fill counts n requests, spread over 50 APIs, in batches of 1000.
func fill(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	for b := 0; b < n; b += 1000 {
		reqs := make([]Request, 0, 1000)
		for i := b; i < min(b+1000, n); i++ {
			reqs = append(reqs, Request{ID: fmt.Sprintf("%s-%d", prefix, i), Key: countkey.CountKey{Cluster: "c", API: fmt.Sprintf("a%d.v1", i%50),
				Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: fmt.Sprintf("user-%d", i%7), Verb: "get"}}})
		}
		_, err := s.Apply(reqs)
		require.NoError(t, err)
	}
}

// total adds up every count of the 50 APIs fill writes to.
func total(t *testing.T, s *Store) uint64 {
	t.Helper()
	var sum uint64
	for i := 0; i < 50; i++ {
		require.NoError(t, s.ScanCounts("c", fmt.Sprintf("a%d.v1", i), hour19, hour19, func(_ countkey.CountKey, n uint64) error {
			sum += n
			return nil
		}))
	}
	return sum
}

// stored is how many requests the test stores hold.
const stored = 10000

// closedStore is a store of 10,000 requests, closed cleanly: its data is in
// tables.
func closedStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir, hour19)
	fill(t, s, "r", stored)
	require.NoError(t, s.Close())
	return dir
}

// crashImage is the directory of a store with 10,000 requests committed and
// not closed, copied as a crash would leave it: the commits are only in the
// write-ahead log.
func crashImage(t *testing.T) string {
	t.Helper()
	live := t.TempDir()
	s := openTest(t, live, hour19)
	defer s.Close()
	fill(t, s, "r", stored)
	// Badger writes through shared memory maps: a read sees the commits,
	// as the disk does after a crash.
	return testdir.Copy(t, live)
}

func truncateTo(t *testing.T, path string, size int64) {
	t.Helper()
	require.NoError(t, os.Truncate(path, size))
}

func TestHealthyStoresVerifyAndOpen(t *testing.T) {
	for name, dir := range map[string]string{"closed": closedStore(t), "crashed": crashImage(t)} {
		t.Run(name, func(t *testing.T) {
			r, err := Verify(dir, true)
			require.NoError(t, err)
			require.Empty(t, r.Problems)
			require.False(t, r.Empty)
			s := openTest(t, dir, hour19)
			require.Equal(t, uint64(stored), total(t, s))
			require.NoError(t, s.Close())
		})
	}
	r, err := Verify(t.TempDir(), true)
	require.NoError(t, err)
	require.True(t, r.Empty)
}

// Every kind of damage stops Open with an error that names the directory,
// the damage and what to do, and leaves the files as they were.
func TestDamagedStoreIsRefused(t *testing.T) {
	closed, crashed := closedStore(t), crashImage(t)
	for _, tc := range []struct {
		name   string
		image  string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"manifest deleted", closed, func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "MANIFEST")))
		}, "MANIFEST is missing, but the directory holds Sunset's marker and 1 table file and 1 log file: badger would start over them, empty or with part of the data"},
		{"everything but the marker deleted", closed, func(t *testing.T, dir string) {
			for _, f := range append(testdir.Files(t, dir, "0*"), filepath.Join(dir, "MANIFEST")) {
				require.NoError(t, os.Remove(f))
			}
		}, "MANIFEST is missing, but the directory holds Sunset's marker: badger would start over them, empty or with part of the data"},
		{"manifest overwritten", closed, func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, "MANIFEST"), os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte("garbage!garbage!"), 10)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "MANIFEST is damaged: "},
		{"manifest cut short", closed, func(t *testing.T, dir string) {
			m := filepath.Join(dir, "MANIFEST")
			fi, err := os.Stat(m)
			require.NoError(t, err)
			truncateTo(t, m, fi.Size()-3)
		}, "MANIFEST ends in a partial record (valid up to byte 16 of 27) and does not list 1 table file (000001.sst): badger would delete them"},
		{"table deleted", closed, func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "000001.sst")))
		}, "table 000001.sst (level 0), listed in the MANIFEST, is missing"},
		{"table cut short", closed, func(t *testing.T, dir string) {
			fi, err := os.Stat(filepath.Join(dir, "000001.sst"))
			require.NoError(t, err)
			truncateTo(t, filepath.Join(dir, "000001.sst"), fi.Size()/2)
		}, "table 000001.sst (level 0) is damaged: its index or first block cannot be read: the file was cut short or overwritten"},
		{"value log cut short", closed, func(t *testing.T, dir string) {
			truncateTo(t, testdir.Files(t, dir, "*.vlog")[0], 5)
		}, "000001.vlog (value log) is 5 bytes, shorter than its 20-byte header: it was cut short"},
		{"write-ahead log cut short", crashed, func(t *testing.T, dir string) {
			// Halfway through what was written: the file is preallocated,
			// and its zeros hold nothing.
			wal := testdir.Files(t, dir, "*.mem")[0]
			b, err := os.ReadFile(wal)
			require.NoError(t, err)
			truncateTo(t, wal, int64(len(bytes.TrimRight(b, "\x00"))/2))
		}, "(write-ahead log) ends inside a record at byte "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testdir.Copy(t, tc.image)
			tc.damage(t, dir)
			before := testdir.Listing(t, dir)
			_, err := Open(Options{Dir: dir})
			require.ErrorIs(t, err, ErrDamaged)
			require.ErrorContains(t, err, "store: the data directory "+dir+" is damaged: ")
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "Sunset does not start over it, so that nothing more is lost: keep a copy of the directory, run `sunset store verify --data-dir "+dir+"`, and follow \"Recovering a damaged store\" in docs/operations.md")
			require.Equal(t, before, testdir.Listing(t, dir), "nothing was changed")

			r, err := Verify(dir, true)
			require.NoError(t, err)
			require.Len(t, r.Problems, 1)
			require.Contains(t, r.Problems[0], tc.want)
		})
	}
}

// A block changed in place is found by the deep check, which reads every
// block; the quick check at startup reads only indexes.
func TestVerifyFindsAChangedBlock(t *testing.T) {
	dir := closedStore(t)
	sst := filepath.Join(dir, "000001.sst")
	fi, err := os.Stat(sst)
	require.NoError(t, err)
	f, err := os.OpenFile(sst, os.O_RDWR, 0)
	require.NoError(t, err)
	// A block in the middle: neither the first nor the last, which the
	// quick check reads for the table's key range.
	_, err = f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, fi.Size()/3)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r, err := Verify(dir, true)
	require.NoError(t, err)
	require.Len(t, r.Problems, 1)
	require.Equal(t, "table 000001.sst (level 0) is damaged: a block fails its checksum: the file was overwritten", r.Problems[0])
	r, err = Verify(dir, false)
	require.NoError(t, err)
	require.Empty(t, r.Problems)
}

// A table the MANIFEST does not list is what a crash between writing a
// table and recording it leaves; badger deletes it, and nothing is lost.
func TestUnlistedTableIsALeftover(t *testing.T) {
	dir := closedStore(t)
	b, err := os.ReadFile(filepath.Join(dir, "000001.sst"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "000009.sst"), b, 0o644))
	r, err := Verify(dir, true)
	require.NoError(t, err)
	require.Empty(t, r.Problems)
	require.Equal(t, []string{"000009.sst"}, r.Leftovers)
	s := openTest(t, dir, hour19)
	defer s.Close()
	require.Equal(t, uint64(stored), total(t, s))
	require.NoFileExists(t, filepath.Join(dir, "000009.sst"))
}

func TestVerifyRefusesADirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, hour19)
	defer s.Close()
	_, err := Verify(dir, false)
	require.ErrorContains(t, err, "store: "+dir+" is in use by another Sunset process")
}
