// Package manifest moves the objects of files on disk (manifests, the
// files a kustomization lists, a chart's templates) from deprecated and
// removed APIs to their replacements, in place, with the same conversion
// the scan names: package convert's table. It is what `sunset scan --fix`
// runs.
//
// A file is rewritten as little as the conversion needs. Where only
// apiVersion changes, the one value is replaced in the text and every
// other byte stays. Where fields change, the document's node tree is
// edited at the paths the conversion changed: a changed map key by key,
// and a changed list or value written anew as a whole (with the file's
// indentation, sequence style and line endings); every key that did not
// change, the comments outside what is written anew and the other
// documents are kept as they were. Each rewritten document is parsed again and must equal the
// conversion, else the file is left alone.
//
// What cannot be rewritten (a refused conversion, a templated apiVersion,
// a JSON manifest whose fields change, a file out of the scanned
// directory, one that does not parse) is left byte for byte as it was and
// listed with the reason. Files are read as a scan reads them: under the
// scanned root, through no symlink that leaves it, regular files only,
// within the scan's size bounds; and written atomically (a temporary file
// in the same directory, with the file's owner, group and mode, synced and
// renamed over it). A read-only file, or one whose owner cannot be kept,
// is listed instead.
package manifest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/scan"
)

// Fixer rewrites files.
type Fixer struct {
	// Conversions moves each object; the scan names the same replacement.
	Conversions *convert.Table
	// Moves reports whether objects of an API are to be moved: the ones
	// the scan reports as deprecated or removed at its target.
	Moves func(apiVersion, kind string) bool
	// DryRun computes every rewrite and writes nothing.
	DryRun bool
	// NotServed, if set, says why a replacement cannot be moved to yet
	// (the cluster's current release does not serve it), or "" when it
	// can. An object whose replacement is not served is listed.
	NotServed func(to convert.GVK) string
}

// lookup is the conversion of an API, refused where its replacement is
// not served yet.
func (f Fixer) lookup(group, version, kind string) (convert.Conversion, bool) {
	c, ok := f.Conversions.Lookup(group, version, kind)
	if ok && c.Method != convert.Refused && c.HasReplacement() && f.NotServed != nil {
		if why := f.NotServed(c.To); why != "" {
			c.Method, c.Reason = convert.Refused, why
		}
	}
	return c, ok
}

// Change is one object moved to its replacement.
type Change struct {
	Kind, Name string
	// Line is the object's first line in the file (its apiVersion's line
	// in a template).
	Line     int
	From, To string
}

func (c Change) String() string {
	name := c.Kind
	if c.Name != "" {
		name += " " + c.Name
	}
	return fmt.Sprintf("line %d: %s %s -> %s", c.Line, name, c.From, c.To)
}

// File is a file rewritten, or to be rewritten in a dry run.
type File struct {
	Path          string
	Changes       []Change
	Before, After []byte
}

// NotRewritten is a file, or an object in one, left as it was.
type NotRewritten struct {
	Path string
	// Line is the object's line, 0 for the whole file.
	Line   int
	Reason string
}

func (n NotRewritten) String() string {
	if n.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", n.Path, n.Line, n.Reason)
	}
	return n.Path + ": " + n.Reason
}

// Result is what a fix did.
type Result struct {
	// Rewritten are the files changed (to change, in a dry run), by path.
	Rewritten []File
	// NotRewritten are files and objects left as they were, by path and
	// line.
	NotRewritten []NotRewritten
	// Files is how many files were read.
	Files int
}

// run is one fix: what was read, so that a file reached twice (two
// kustomizations listing it, a symlink) is rewritten once.
type run struct {
	f    Fixer
	ctx  context.Context
	seen map[string]bool
	// left are the APIs ("apiVersion kind", or anyAPI) of the objects
	// each file left where they were, which a kustomize patch target must
	// go on naming.
	left map[string][]string
	// kdirs are the files each kustomization directory read, by its
	// resolved path, and returned again on a later visit.
	kdirs map[string][]string
	// hold are the APIs ("apiVersion kind") each file (by samePath) keeps
	// where they are, with its kustomization.
	hold    map[string]map[string]held
	res     Result
	pending []pending
}

type pending struct {
	file File
	real string
}

// Fix rewrites the paths, each a manifest file, a kustomization or chart
// directory, or a directory walked as a scan walks it.
func (f Fixer) Fix(ctx context.Context, paths []string) Result {
	// A kustomization builds only if each patch and the objects it
	// patches are on the same API, so it is one unit per API: when any of
	// its files leaves an object or patch of an API, every file of it
	// holds that API too. What is held makes more left, so the fix is
	// computed again until nothing new is held; nothing is written before.
	hold := map[string]map[string]held{}
	var r *run
	for {
		r = &run{f: f, ctx: ctx, seen: map[string]bool{}, left: map[string][]string{}, kdirs: map[string][]string{}, hold: hold}
		for _, p := range paths {
			if ctx.Err() != nil {
				r.skip(p, 0, ctx.Err().Error())
				break
			}
			r.path(p)
		}
		if !r.holdUnits() {
			break
		}
	}
	for _, p := range r.pending {
		if !f.DryRun {
			if err := writeAtomic(p.real, p.file.Before, p.file.After); err != nil {
				r.skip(p.file.Path, 0, err.Error())
				continue
			}
		}
		r.res.Rewritten = append(r.res.Rewritten, p.file)
	}
	slices.SortFunc(r.res.Rewritten, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	sortNotRewritten(r.res.NotRewritten)
	return r.res
}

func (r *run) skip(path string, line int, reason string) {
	r.res.NotRewritten = append(r.res.NotRewritten, NotRewritten{Path: path, Line: line, Reason: reason})
}

func (r *run) path(path string) {
	if path == "-" {
		r.skip(path, 0, "standard input is not a file to rewrite: give the files or directories")
		return
	}
	info, err := os.Stat(path)
	if err != nil {
		r.skip(path, 0, err.Error())
		return
	}
	if !info.IsDir() {
		root, err := scan.NewRoot(filepath.Dir(path))
		if err != nil {
			r.skip(path, 0, err.Error())
			return
		}
		switch base := filepath.Base(path); {
		case isKustomization(base):
			r.kustomization(root, filepath.Dir(path))
		case base == "Chart.yaml":
			r.chart(root, filepath.Dir(path))
		case strings.HasSuffix(path, ".tgz"):
			r.skip(path, 0, "a packed chart is not rewritten: unpack it, fix the directory and package it again")
		default:
			r.manifest(root, path, false)
		}
		return
	}
	root, err := scan.NewRoot(path)
	if err != nil {
		r.skip(path, 0, err.Error())
		return
	}
	r.walk(root, path)
}

// walk visits dir as a scan does: a kustomization or a chart as a whole,
// else every manifest, hidden directories skipped, no symlink followed.
func (r *run) walk(root scan.Root, dir string) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			r.skip(p, 0, err.Error())
			return nil
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			switch {
			case hasFile(p, kustomizationFiles...):
				r.kustomization(root, p)
				return filepath.SkipDir
			case hasFile(p, "Chart.yaml"):
				r.chart(root, p)
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" || ext == ".json" {
			r.manifest(root, p, false)
		}
		return nil
	})
	if err != nil {
		r.skip(dir, 0, err.Error())
	}
}

// read reads path under root as a scan does, once per file it resolves
// to; ok is false when it was read already or cannot be (then listed).
func (r *run) read(root scan.Root, path string) (data []byte, real string, ok bool) {
	real, _, err := root.Resolve(path)
	if err == nil {
		if r.seen[real] {
			return nil, "", false
		}
		r.seen[real] = true
		data, err = root.ReadFile(path, scan.MaxFileSize)
	}
	if reason, skipped := scan.IsSkip(err); skipped {
		r.skip(path, 0, reason)
		return nil, "", false
	}
	if err != nil {
		r.skip(path, 0, err.Error())
		return nil, "", false
	}
	r.res.Files++
	return data, real, true
}

// manifest rewrites one manifest file; patch says it is a kustomize patch,
// a partial object, which is moved only where its fields stay the same.
func (r *run) manifest(root scan.Root, path string, patch bool) {
	data, real, ok := r.read(root, path)
	if !ok {
		return
	}
	json := strings.EqualFold(filepath.Ext(path), ".json") || startsJSON(data)
	f := r.f
	if held := r.hold[samePath(path)]; held != nil {
		f.Moves = func(apiVersion, kind string) bool {
			return !held[apiVersion+" "+kind].held && r.f.Moves(apiVersion, kind)
		}
		for _, api := range slices.Sorted(maps.Keys(held)) {
			for _, line := range held[api].lines {
				r.skip(path, line, fmt.Sprintf("%s is left with the rest of its kustomization, where an object or patch of it is left (see the list): kustomize matches a patch only to objects of its own API; move them together by hand", api))
			}
			r.left[path] = append(r.left[path], api)
		}
	}
	out, changes, problems := rewriteStream(data, f, json, patch)
	for _, p := range problems {
		r.skip(path, p.line, p.reason)
		r.left[path] = append(r.left[path], p.api)
	}
	r.keep(path, real, data, out, changes)
}

// keep records a rewritten file, to be written once everything was read.
func (r *run) keep(path, real string, before, after []byte, changes []Change) {
	if len(changes) == 0 || bytes.Equal(before, after) {
		return
	}
	r.pending = append(r.pending, pending{file: File{Path: path, Changes: changes, Before: before, After: after}, real: real})
}

func startsJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n\ufeff")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// kustomizationFiles are the names kustomize looks for in a directory.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

func isKustomization(name string) bool { return slices.Contains(kustomizationFiles, name) }

// hasFile reports whether dir has a regular file, or a symlink, of one of
// the names, as the scan decides what a directory is.
func hasFile(dir string, names ...string) bool {
	for _, n := range names {
		if info, err := os.Lstat(filepath.Join(dir, n)); err == nil && (info.Mode().IsRegular() || info.Mode()&fs.ModeSymlink != 0) {
			return true
		}
	}
	return false
}

func sortNotRewritten(list []NotRewritten) {
	slices.SortStableFunc(list, func(a, b NotRewritten) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
}
