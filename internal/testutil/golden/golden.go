// Package golden compares what a test produced with a file kept in the
// repository, and rewrites that file when the test runs with -update
// (`make update-golden`). It owns the one -update flag of the repository:
// every test binary that imports it has the flag, and tests that
// generate other files (screenshots, manifests) ask Update whether to
// write them.
//
// It is for tests only; production code must not import it.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files, and the files tests generate, from what the tests produce (make update-golden)")

// Update reports whether the test binary runs with -update.
func Update() bool { return *update }

// Assert requires got to equal the file at path, byte for byte. With
// -update it writes got there first, creating the directory.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		write(t, path, got)
	}
	require.Equal(t, string(read(t, path)), string(got), "%s differs; if the change is intended, run make update-golden and review the diff", path)
}

// AssertJSON requires got to be JSON equal to the file at path. With
// -update it writes got there first, indented so that a change reads as
// a diff.
func AssertJSON(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		var pretty bytes.Buffer
		require.NoError(t, json.Indent(&pretty, got, "", "  "))
		write(t, path, append(bytes.TrimRight(pretty.Bytes(), "\n"), '\n'))
	}
	require.JSONEq(t, string(read(t, path)), string(got), "%s differs; if the change is intended, run make update-golden and review the diff", path)
}

func write(t testing.TB, path string, b []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "%s is missing: run the test with -update (make update-golden) to create it", path)
	return b
}
