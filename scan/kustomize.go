package scan

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/scan/report"
)

// kustomization builds the kustomization in dir, as `kubectl kustomize`
// does, and judges what it outputs. Each finding names the resource file
// the object came from and its line there, which kustomize's origin
// annotations tell.
//
// Kustomize reads through a confinedFS: files only, regular ones, within
// the bounds, under scanned (or KustomizeRoot) and through no symlink out
// of it, and, unless AllowRemote,
// a kustomization or plugin configuration that names a remote resource is
// refused before kustomize acts on it, so that it never fetches a URL or
// runs git.
func (s Files) kustomization(scanned Root, dir string) report.Result {
	s.progress("kustomization", dir)
	root, err := filepath.Abs(dir)
	if err != nil {
		return failed(dir, err)
	}
	opts := krusty.MakeDefaultOptions()
	// Plugins other than kustomize's builtins, KRM functions and helm
	// stay off (the defaults); a scan runs no program.
	opts.PluginConfig = types.DisabledPluginConfig()
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	cfs := &confinedFS{FileSystem: filesys.MakeFsOnDisk(), scanned: scanned, allowRemote: s.AllowRemote}
	if s.KustomizeRoot != "" {
		widened, err := NewRoot(s.KustomizeRoot)
		if err != nil {
			return failed(dir, fmt.Errorf("--kustomize-root: %w", err))
		}
		if !widened.Contains(scanned.real) {
			return failed(dir, fmt.Errorf("--kustomize-root %s does not hold %s: pass a directory that holds what is scanned", widened.lexical, scanned.lexical))
		}
		cfs.widened = &widened
	}
	m, err := krusty.MakeKustomizer(opts).Run(originFS{FileSystem: cfs, root: root}, root)
	if cfs.refused != nil {
		// Kustomize reports some failed reads as a missing file; the
		// reason is ours.
		return failed(dir, cfs.refused)
	}
	if err != nil {
		return failed(dir, fmt.Errorf("kustomize build: %w", err))
	}
	res := report.Result{Scanned: report.Scanned{Kustomizations: 1}}
	lines := fileLines{judge: s.Judge, root: scanned}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			res.Errors = append(res.Errors, report.InputError{Path: dir, Err: err.Error()})
			continue
		}
		if res.Scanned.Objects >= MaxObjects {
			return failed(dir, errTooManyObjects)
		}
		objs, err := s.Judge.readObjects(y)
		if err != nil {
			res.Errors = append(res.Errors, report.InputError{Path: dir, Err: err.Error()})
			continue
		}
		for _, o := range objs {
			res.Scanned.Objects++
			origin := report.Origin{Path: dir}
			if from, err := r.GetOrigin(); err == nil && from != nil {
				origin.File = from.Path
				if from.Path == "" {
					origin.File = from.ConfiguredIn
				}
				if from.Repo == "" && origin.File != "" {
					origin.Line = lines.find(filepath.Join(root, origin.File), o)
				}
			}
			res.Findings = append(res.Findings, s.Judge.Judge(o, origin)...)
		}
	}
	return res
}

// fileLines finds an object's line in the file kustomize read it from,
// reading each file once.
type fileLines struct {
	judge Judge
	root  Root
	files map[string][]Object
}

// find returns the line of the object in path that o was built from: the
// one of its kind, or, of several, the one whose name o's name contains
// (kustomize adds prefixes and suffixes); 0 if none.
func (f *fileLines) find(path string, o Object) int {
	if f.files == nil {
		f.files = map[string][]Object{}
	}
	objs, ok := f.files[path]
	if !ok {
		// The file was read by kustomize already; a failure here leaves the
		// line unknown rather than failing the scan.
		if data, err := f.root.ReadFile(path, MaxFileSize); err == nil {
			objs, _ = f.judge.readObjects(data)
		}
		f.files[path] = objs
	}
	var same []Object
	for _, c := range objs {
		if c.Kind == o.Kind {
			same = append(same, c)
		}
	}
	if len(same) == 1 {
		return same[0].Line
	}
	for _, c := range same {
		if c.Name != "" && strings.Contains(o.Name, c.Name) {
			return c.Line
		}
	}
	return 0
}

// originFS is the disk, except that the root kustomization asks for origin
// annotations, so that every built object says which file it came from.
type originFS struct {
	filesys.FileSystem
	root string
}

func (f originFS) ReadFile(path string) ([]byte, error) {
	b, err := f.FileSystem.ReadFile(path)
	if err != nil || !isKustomization(filepath.Base(path)) || filepath.Dir(absPath(path)) != f.root {
		return b, err
	}
	var k map[string]any
	if err := yaml.Unmarshal(b, &k); err != nil || k == nil {
		return b, nil // kustomize reports the error itself
	}
	meta, _ := k["buildMetadata"].([]any)
	if !slices.Contains(meta, any("originAnnotations")) {
		k["buildMetadata"] = append(meta, "originAnnotations")
	}
	return yaml.Marshal(k)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
