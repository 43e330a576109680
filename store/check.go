package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/internal/plural"
)

// Badger leaves a damaged directory in ways it cannot tell from a new one:
// without its MANIFEST it starts empty and deletes every table, and with a
// MANIFEST cut short it deletes the tables the lost part listed. A table
// cut short makes it panic in a goroutine of its own, which kills the
// process. So the store looks at the directory itself before badger does.

// markerName is the file Open leaves in a data directory once badger has
// opened it, so that a lost MANIFEST is told from a directory never used.
const markerName = "SUNSET-STORE"

const markerText = "This directory holds a Sunset store (badger). Keep this file: it lets Sunset tell a lost MANIFEST from a new directory.\n"

// logHeaderSize is the header of badger's log files (.mem and .vlog): a key
// ID and an IV, 20 bytes.
const logHeaderSize = 20

// Badger's record flags in log files.
const (
	bitTxn    byte = 1 << 6
	bitFinTxn byte = 1 << 7
)

// ErrDamaged is matched by the *DamageError that Open returns for a damaged
// data directory.
var ErrDamaged = errors.New("store: data directory is damaged")

// DamageError lists what is wrong with a data directory.
type DamageError struct {
	Dir      string
	Problems []string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("store: the data directory %s is damaged: %s. Sunset does not start over it, so that nothing more is lost: "+
		"keep a copy of the directory, run `sunset store verify --data-dir %s`, and follow \"Recovering a damaged store\" in docs/operations.md",
		e.Dir, strings.Join(e.Problems, "; "), e.Dir)
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// Report is what Verify found in a data directory.
type Report struct {
	Dir string
	// Empty is true for a directory that holds no store yet.
	Empty bool
	// ManifestRead is true once the MANIFEST was read: Tables, TableBytes
	// and Levels are known.
	ManifestRead bool
	// Tables is how many tables the MANIFEST lists, TableBytes their size
	// and Levels how many LSM levels hold any.
	Tables     int
	TableBytes int64
	Levels     int
	// Logs and ValueLogs count the write-ahead logs (.mem) and value logs
	// (.vlog).
	Logs, ValueLogs int
	// Leftovers are table files the MANIFEST does not list, left by a flush
	// or compaction that a crash cut short. Badger deletes them when it
	// opens the directory; nothing committed is in them.
	Leftovers []string
	// EmptyLogs are logs a crash left at 0 bytes, between badger creating
	// a file and sizing it. They hold nothing, but badger refuses to open
	// a directory with one (dgraph-io/badger#2207), so a writer's Open
	// removes them first.
	EmptyLogs []string
	// Problems says what is damaged, one sentence each.
	Problems []string
}

// Healthy reports whether nothing is damaged.
func (r Report) Healthy() bool { return len(r.Problems) == 0 }

// Verify checks a data directory without changing it: the MANIFEST, every
// table it lists (with deep, every block's checksum as well), and the
// write-ahead and value logs. It fails if a running server holds the
// directory: its files change under the check.
func Verify(dir string, deep bool) (Report, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return Report{Dir: dir}, fmt.Errorf("store: %s does not exist", dir)
	} else if err != nil {
		return Report{Dir: dir}, fmt.Errorf("store: %w", err)
	}
	unlock, err := lockDir(dir, true)
	if err != nil {
		return Report{Dir: dir}, err
	}
	defer unlock()
	return inspect(dir, deep)
}

// checkBeforeOpen refuses a damaged directory before badger opens it, and
// removes the empty logs a crash left, returning their names. It holds the
// directory's lock while it looks, so no Sunset writes meanwhile, and lets
// go so that badger can take it.
func checkBeforeOpen(dir string, readOnly bool) ([]string, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if readOnly {
			// Most often a mistyped --data-dir: say so, rather than
			// badger's error and advice for a damaged store.
			return nil, fmt.Errorf("store: there is no data directory %s: check --data-dir (a server or a replay creates it)", dir)
		}
		return nil, nil
	}
	unlock, err := lockDir(dir, readOnly)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r, err := inspect(dir, false)
	if err != nil {
		return nil, err
	}
	if !r.Healthy() {
		return nil, &DamageError{Dir: dir, Problems: r.Problems}
	}
	if len(r.EmptyLogs) == 0 {
		return nil, nil
	}
	if readOnly {
		return nil, fmt.Errorf("store: %s holds %s that a crash left empty (%s), which badger cannot open beside; a read-only open changes nothing: start `sunset serve` on the directory once, which removes it",
			dir, howMany(len(r.EmptyLogs), "log file"), strings.Join(r.EmptyLogs, ", "))
	}
	for _, name := range r.EmptyLogs {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return nil, fmt.Errorf("store: removing the empty log %s: %w", name, err)
		}
	}
	return r.EmptyLogs, z.SyncDir(dir)
}

// lockDir takes the flock badger takes on the directory: exclusive for a
// writer, shared for readers.
func lockDir(dir string, shared bool) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, inUse(dir, fmt.Errorf("Cannot acquire directory lock on %q: %w", dir, err)) //nolint:staticcheck // badger's own words, which isLocked recognises.
	}
	return func() { _ = f.Close() }, nil
}

// writeMarker leaves the marker in a directory badger has opened.
func writeMarker(dir string) error {
	path := filepath.Join(dir, markerName)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(markerText), 0o644); err != nil {
		return fmt.Errorf("store: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("store: writing %s: %w", path, err)
	}
	return z.SyncDir(dir)
}

// inspect does the checks of Verify; the caller holds the lock.
func inspect(dir string, deep bool) (Report, error) {
	r := Report{Dir: dir}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return r, fmt.Errorf("store: %w", err)
	}
	var (
		hasManifest, hasMarker bool
		tableFiles             = map[uint64]string{}
		logs                   []string
	)
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == badger.ManifestFilename:
			hasManifest = true
		case name == markerName:
			hasMarker = true
		case strings.HasSuffix(name, ".sst"):
			if id, ok := table.ParseFileID(name); ok {
				tableFiles[id] = name
			}
		case strings.HasSuffix(name, ".mem"), strings.HasSuffix(name, ".vlog"):
			if strings.HasSuffix(name, ".mem") {
				r.Logs++
			} else {
				r.ValueLogs++
			}
			logs = append(logs, name)
			if info, err := e.Info(); err == nil && info.Size() == 0 {
				r.EmptyLogs = append(r.EmptyLogs, name)
			}
		}
	}
	if !hasManifest {
		if !hasMarker && len(tableFiles) == 0 && len(logs) == 0 {
			r.Empty = true
			return r, nil
		}
		what := []string{}
		if hasMarker {
			what = append(what, "Sunset's marker")
		}
		if len(tableFiles) > 0 {
			what = append(what, howMany(len(tableFiles), "table file"))
		}
		if len(logs) > 0 {
			what = append(what, howMany(len(logs), "log file"))
		}
		r.Problems = append(r.Problems, fmt.Sprintf("MANIFEST is missing, but the directory holds %s: badger would start over them, empty or with part of the data",
			strings.Join(what, " and ")))
		return r, nil
	}

	mf, torn, err := readManifest(dir)
	if err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("MANIFEST is damaged: %v", err))
		return r, nil
	}
	r.ManifestRead = true
	r.Tables = len(mf.Tables)
	levels := map[uint8]bool{}
	for _, id := range slices.Sorted(mapKeys(mf.Tables)) {
		tm := mf.Tables[id]
		levels[tm.Level] = true
		name := table.IDToFilename(id)
		if _, ok := tableFiles[id]; !ok {
			r.Problems = append(r.Problems, fmt.Sprintf("table %s (level %d), listed in the MANIFEST, is missing", name, tm.Level))
			continue
		}
		size, err := checkTable(filepath.Join(dir, name), tm.Compression, deep)
		r.TableBytes += size
		if err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("table %s (level %d) is damaged: %v", name, tm.Level, err))
		}
	}
	r.Levels = len(levels)
	for _, id := range slices.Sorted(mapKeys(tableFiles)) {
		if _, ok := mf.Tables[id]; !ok {
			r.Leftovers = append(r.Leftovers, tableFiles[id])
		}
	}
	if torn != "" && len(r.Leftovers) > 0 {
		// A crash cuts at most the one record being appended, and the
		// tables it named hold nothing committed. A MANIFEST cut short by
		// damage looks the same; only the operator can tell which.
		r.Problems = append(r.Problems, fmt.Sprintf("MANIFEST ends in a partial record (%s) and does not list %s (%s): badger would delete them",
			torn, howMany(len(r.Leftovers), "table file"), strings.Join(r.Leftovers, ", ")))
	}
	for _, name := range logs {
		if msg := checkLog(filepath.Join(dir, name)); msg != "" {
			kind := "write-ahead log"
			if strings.HasSuffix(name, ".vlog") {
				kind = "value log"
			}
			r.Problems = append(r.Problems, fmt.Sprintf("%s (%s) %s", name, kind, msg))
		}
	}
	return r, nil
}

func mapKeys[V any](m map[uint64]V) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// howMany spells n of what: "1 log file", "2 log files".
func howMany(n int, what string) string {
	return fmt.Sprintf("%d %s%s", n, what, plural.S(n))
}

// readManifest replays the MANIFEST read-only. torn describes a partial
// record at its end, if any.
func readManifest(dir string) (badger.Manifest, string, error) {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return badger.Manifest{}, "", err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return badger.Manifest{}, "", err
	}
	mf, end, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir).WithLogger(badgerLogger{zerolog.Nop()}))
	if err != nil {
		return badger.Manifest{}, "", err
	}
	torn := ""
	if end < fi.Size() {
		torn = fmt.Sprintf("valid up to byte %d of %d", end, fi.Size())
	}
	return mf, torn, nil
}

// checkTable opens a table as badger does, reading its index and its first
// and last blocks, and with deep every block. Badger panics on a table cut
// short, and on a block that fails its checksum; that is an answer here.
func checkTable(path string, compression options.CompressionType, deep bool) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fi.Size(), err
	}
	defer func() { _ = mf.Close(-1) }()
	opts := badgerOptions(filepath.Dir(path), zerolog.Nop())
	var t *table.Table
	err = recovered("its index or first block cannot be read: the file was cut short or overwritten", func() error {
		var err error
		t, err = table.OpenTable(mf, table.Options{
			ReadOnly: true, BlockSize: opts.BlockSize, BloomFalsePositive: opts.BloomFalsePositive,
			TableSize: uint64(opts.BaseTableSize), Compression: compression,
		})
		return err
	})
	if err != nil || !deep {
		return fi.Size(), err
	}
	const damaged = "a block fails its checksum: the file was overwritten"
	// Badger panics on some damaged blocks and returns an error on others.
	if recovered(damaged, t.VerifyChecksum) != nil {
		return fi.Size(), errors.New(damaged)
	}
	return fi.Size(), nil
}

// recovered runs fn and turns a panic into an error saying msg.
func recovered(msg string, fn func() error) (err error) {
	defer func() {
		if recover() != nil {
			err = errors.New(msg)
		}
	}()
	return fn()
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkLog says what is wrong with a log file, or "". Badger replays a log
// up to its last complete record and drops the rest: after a crash the
// rest is a record cut short followed by the zeros of the preallocated
// file, but a file cut short ends inside a record. Those records were
// committed, and badger would drop them without a word.
func checkLog(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("cannot be read: %v", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("cannot be read: %v", err)
	}
	size := fi.Size()
	if size == 0 {
		// Created, and a crash came before badger sized it: it holds
		// nothing (Report.EmptyLogs).
		return ""
	}
	if size < logHeaderSize {
		return fmt.Sprintf("is %d bytes, shorter than its %d-byte header: it was cut short", size, logHeaderSize)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Sprintf("cannot be read: %v", err)
	}
	defer func() { _ = syscall.Munmap(data) }()
	end := logEnd(data)
	if end == size {
		return ""
	}
	tail := data[max(size-8, end):]
	for _, b := range tail {
		if b != 0 {
			return fmt.Sprintf("ends inside a record at byte %d of %d: it was cut short, and the commits after byte %d are lost", end, size, end)
		}
	}
	return ""
}

// logEnd returns the offset just after the last complete record of a log:
// a record outside a transaction, or the record that closes one.
func logEnd(data []byte) int64 {
	off, valid := logHeaderSize, logHeaderSize
	inTxn := false
	for {
		meta, n := logRecord(data[off:])
		if n == 0 {
			return int64(valid)
		}
		off += n
		switch {
		case meta&bitTxn != 0:
			inTxn = true
		case meta&bitFinTxn != 0:
			inTxn, valid = false, off
		case inTxn:
			return int64(valid)
		default:
			valid = off
		}
	}
}

// logRecord decodes the record at the start of b: a header (meta, user
// meta, then key length, value length and expiry as uvarints), the key, the
// value and a CRC-32C of all that. It returns the record's length, or 0
// if b does not start with a complete, intact record.
func logRecord(b []byte) (meta byte, n int) {
	if len(b) < 2 {
		return 0, 0
	}
	h := 2
	var fields [3]uint64
	for i := range fields {
		v, k := binary.Uvarint(b[h:])
		if k <= 0 {
			return 0, 0
		}
		fields[i], h = v, h+k
	}
	klen, vlen := fields[0], fields[1]
	if klen == 0 || klen > 1<<16 || vlen > uint64(len(b)) {
		return 0, 0
	}
	end := h + int(klen) + int(vlen)
	if end+crc32.Size > len(b) {
		return 0, 0
	}
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
		return 0, 0
	}
	return b[0], end + crc32.Size
}
