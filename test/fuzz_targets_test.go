package test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	fuzzFunc    = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	fuzzTargets = regexp.MustCompile(`(?ms)^FUZZ_TARGETS\s*:=\s*(.*?)[^\\]\n`)
)

// make fuzz runs every fuzz target in the repository: its list in the
// Makefile is the one the code's Fuzz functions make, package by package.
func TestMakeFuzzRunsEveryFuzzTarget(t *testing.T) {
	var inCode []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || path == filepath.Join("..", "test", "e2e")) {
			return filepath.SkipDir // hidden folders, and the e2e module
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(src), -1) {
			inCode = append(inCode, "./"+filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))+":"+m[1])
		}
		return nil
	})
	require.NoError(t, err)
	makefile, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	m := fuzzTargets.FindSubmatch(makefile)
	require.NotNil(t, m, "the Makefile sets no FUZZ_TARGETS")
	inMake := strings.Fields(strings.ReplaceAll(string(m[0][len("FUZZ_TARGETS"):]), "\\\n", " "))
	inMake = slices.DeleteFunc(inMake, func(s string) bool { return s == ":=" })
	slices.Sort(inCode)
	slices.Sort(inMake)
	require.Equal(t, inCode, inMake, "FUZZ_TARGETS in the Makefile")
}
