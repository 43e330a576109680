package store

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/kube-sunset/sunset/countkey"
)

// Badger's sizes, chosen so that the room it needs to write safely is small
// enough to keep free on any volume. Badger writes its memtable's
// write-ahead log, its value log and its tables through memory maps: on a
// full filesystem such a write cannot return ENOSPC, the kernel sends SIGBUS
// and the process dies. The only defence is to stop writing while there is
// still room for everything badger may write on its own.
const (
	// memTableSize is badger's MemTableSize: the write-ahead log of one
	// memtable grows to about this much before it is flushed to a table.
	memTableSize = 8 << 20
	// numMemtables is how many full memtables may wait for their flush.
	numMemtables = 3
	// valueLogFileSize is badger's ValueLogFileSize. Sunset's values are
	// far below badger's value threshold (1 MiB), so the value log holds
	// little more than its header; the reserve still covers a full one.
	valueLogFileSize = 8 << 20
	// compactionRoom is what a compaction writes before it deletes its
	// inputs: a level-0 compaction of the memtables' tables into level 1,
	// whose base size is badger's default 10 MiB.
	compactionRoom = 24 << 20
)

// DiskReserve is the free space, in bytes, that the data directory's
// filesystem must keep for badger: the rest of the active memtable's
// write-ahead log (8 MiB) and value log file (8 MiB), the level-0 tables of
// the full memtables (3 x 8 MiB) and one compaction's output (24 MiB):
// 64 MiB. Below it the store refuses writes with ErrNoSpace before badger
// touches the disk.
const DiskReserve = memTableSize + valueLogFileSize + numMemtables*memTableSize + compactionRoom

// SpaceError says how much room there was. It matches
// countkey.ErrNoSpace: writes return it while the data directory's
// filesystem has less free space than the reserve, or when a write failed
// for lack of space. Nothing of the write was committed, and retrying
// once there is room is safe.
type SpaceError struct {
	Dir     string
	Free    int64
	Reserve int64
	// Err is the write error, when a write failed for lack of space.
	Err error
}

func (e *SpaceError) Error() string { return "store: " + e.Detail() }

// Detail says what is short and what to do, without naming the store: for
// a reader that names the component itself, as readiness's "disk" does.
func (e *SpaceError) Detail() string {
	if e.Err != nil {
		return fmt.Sprintf("the filesystem of %s ran out of space (%s free): %v; free space or grow the volume, Sunset retries", e.Dir, mib(e.Free), e.Err)
	}
	return fmt.Sprintf("only %s free on the filesystem of %s, below the %s reserve badger needs to write safely; free space or grow the volume, Sunset resumes by itself", mib(e.Free), e.Dir, mib(e.Reserve))
}

// Is makes errors.Is(err, ErrNoSpace) true.
func (e *SpaceError) Is(target error) bool { return target == countkey.ErrNoSpace }

// Unwrap returns the write error, if any.
func (e *SpaceError) Unwrap() error { return e.Err }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// Filesystem is the room on the data directory's filesystem, in bytes.
type Filesystem struct {
	Free, Size int64
}

// Filesystem reads the room on the data directory's filesystem.
func (s *Store) Filesystem() (Filesystem, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &fs); err != nil {
		return Filesystem{}, fmt.Errorf("store: reading free space of %s: %w", s.dir, err)
	}
	// Bsize is an int64 on Linux and a uint32 on darwin.
	block := int64(fs.Bsize)
	return Filesystem{Free: int64(fs.Bavail) * block, Size: int64(fs.Blocks) * block}, nil
}

// CheckSpace returns a *SpaceError while the filesystem has less free space
// than the reserve, and nil when a write may go ahead. It is one statfs
// call, cheap beside a commit's fsync.
func (s *Store) CheckSpace() error {
	fs, err := s.Filesystem()
	if err != nil {
		// Without the figure, writing is no more dangerous than before.
		return nil
	}
	if fs.Free < s.reserve {
		return &SpaceError{Dir: s.dir, Free: fs.Free, Reserve: s.reserve}
	}
	return nil
}

// Reserve is the free space the store keeps, in bytes.
func (s *Store) Reserve() int64 { return s.reserve }

// Refused counts writes refused or failed for lack of space.
func (s *Store) Refused() uint64 { return s.refused.Load() }

// guardSpace refuses a write below the reserve, counting it.
func (s *Store) guardSpace() error {
	if err := s.CheckSpace(); err != nil {
		s.refused.Add(1)
		return err
	}
	return nil
}

// spaceError turns a write error caused by a full filesystem into a
// *SpaceError, so callers treat it as "retry later", not as a fault.
func (s *Store) spaceError(err error) error {
	// Badger wraps some errors as text only; the message is the kernel's.
	if err == nil || (!errors.Is(err, syscall.ENOSPC) && !strings.Contains(err.Error(), syscall.ENOSPC.Error())) {
		return err
	}
	s.refused.Add(1)
	fs, _ := s.Filesystem()
	return &SpaceError{Dir: s.dir, Free: fs.Free, Reserve: s.reserve, Err: err}
}
