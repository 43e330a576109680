package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/kube-sunset/sunset/internal/plural"
)

// Badger leaves a damaged directory in ways it cannot tell from a new one:
// without its MANIFEST it starts empty and deletes every table, and with a
// MANIFEST cut short it deletes the tables the lost part listed. A table
// cut short makes it panic in a goroutine of its own, which kills the
// process. So the store looks at the directory itself before badger does.

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
