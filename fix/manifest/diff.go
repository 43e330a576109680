package manifest

import (
	"path/filepath"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// Diff is the file's change as a unified diff, --- a/path and +++ b/path,
// three lines of context.
func (f File) Diff() (string, error) {
	name := strings.TrimPrefix(filepath.ToSlash(f.Path), "/")
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: diffLines(f.Before), B: diffLines(f.After),
		FromFile: "a/" + name, ToFile: "b/" + name, Context: 3,
	})
}

// diffLines cuts text after each newline; a last line without one is
// marked as diff marks it.
func diffLines(b []byte) []string {
	lines := strings.SplitAfter(string(b), "\n")
	if last := lines[len(lines)-1]; last == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] = last + "\n\\ No newline at end of file\n"
	}
	return lines
}
