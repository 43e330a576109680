package manifest

import (
	"fmt"
	"path/filepath"
)

// Found is an object the scan reports as one to move, in the file at
// Path (Line 0 when the scan does not know it).
type Found struct {
	Path             string
	Line             int
	APIVersion, Kind string
}

// CheckFound lists each object found in a file the fix neither rewrote
// nor listed, so that nothing the scan reports is dropped without a word:
// a fix that reads fewer files than the scan, or reads one another way,
// must not pass for a clean tree.
func (res *Result) CheckFound(found []Found) {
	handled := map[string]bool{}
	for _, f := range res.Rewritten {
		handled[samePath(f.Path)] = true
	}
	for _, n := range res.NotRewritten {
		handled[samePath(n.Path)] = true
	}
	added := false
	for _, f := range found {
		if handled[samePath(f.Path)] {
			continue
		}
		res.NotRewritten = append(res.NotRewritten, NotRewritten{Path: f.Path, Line: f.Line,
			Reason: fmt.Sprintf("%s %s: not handled by --fix, though the scan reports it; move it by hand", f.APIVersion, f.Kind)})
		added = true
	}
	if added {
		sortNotRewritten(res.NotRewritten)
	}
}

// samePath is path as a fix and a scan both name it: absolute, through
// its symlinks where it resolves.
func samePath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return path
}
