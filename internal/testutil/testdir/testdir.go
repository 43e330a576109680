// Package testdir copies and describes data directories for tests that
// damage, crash or compare them: a copy to harm, and what every file holds
// before and after.
//
// It is for tests only; production code must not import it.
package testdir

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Copy copies the files of from (not its subdirectories, which a data
// directory has none of) into a new directory of the test's own.
func Copy(t testing.TB, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o600))
	}
	return to
}

// Files are the files of dir that match glob, sorted.
func Files(t testing.TB, dir, glob string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, glob))
	require.NoError(t, err)
	slices.Sort(m)
	return m
}

// Contents maps every file of dir to what it holds.
func Contents(t testing.TB, dir string) map[string]string {
	t.Helper()
	return describe(t, dir, func(e os.DirEntry) string {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		return string(b)
	})
}

// Listing maps every file of dir to its size and modification time, which
// change when anything writes it, even the same bytes.
func Listing(t testing.TB, dir string) map[string]string {
	t.Helper()
	return describe(t, dir, func(e os.DirEntry) string {
		fi, err := e.Info()
		require.NoError(t, err)
		return fmt.Sprintf("%d %s", fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
	})
}

func describe(t testing.TB, dir string, of func(os.DirEntry) string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		out[e.Name()] = of(e)
	}
	return out
}
