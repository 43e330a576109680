package store

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dgraph-io/ristretto/v2/z"
)

// markerName is the file Open leaves in a data directory once badger has
// opened it, so that a lost MANIFEST is told from a directory never used.
const markerName = "SUNSET-STORE"

const markerText = "This directory holds a Sunset store (badger). Keep this file: it lets Sunset tell a lost MANIFEST from a new directory.\n"

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
