package manifest

import (
	"slices"
	"strings"
)

// held is an API a file keeps with its kustomization, and the lines of
// its objects there.
type held struct {
	held  bool
	lines []int
}

// holdUnits holds, in each file of a kustomization, the APIs some file of
// it left; it reports whether anything new is held.
func (r *run) holdUnits() bool {
	changed := map[string][]Change{}
	for _, p := range r.pending {
		changed[samePath(p.file.Path)] = p.file.Changes
	}
	more := false
	for _, files := range r.kdirs {
		left := map[string]bool{}
		for _, f := range files {
			for _, api := range r.left[f] {
				left[api] = true
			}
		}
		if len(left) == 0 {
			continue
		}
		for _, f := range files {
			key := samePath(f)
			for _, c := range changed[key] {
				api := c.From + " " + c.Kind
				if !left[api] && !left[anyAPI] || strings.HasPrefix(c.Name, "(the target of ") {
					continue
				}
				if r.hold[key] == nil {
					r.hold[key] = map[string]held{}
				}
				h := r.hold[key][api]
				if slices.Contains(h.lines, c.Line) {
					continue // a base of two overlays
				}
				h.held = true
				h.lines = append(h.lines, c.Line)
				slices.Sort(h.lines)
				r.hold[key][api] = h
				more = true
			}
		}
	}
	return more
}
