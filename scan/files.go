package scan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kube-sunset/sunset/scan/report"
)

// Files configures a scan of paths on disk.
type Files struct {
	Judge Judge
	// Stdin is read for the path "-".
	Stdin io.Reader
	// Charts renders the charts among the paths; without it, a chart is
	// an input error.
	Charts ChartRenderer
	// Progress, if set, is told each file, kustomization and chart as it is
	// read.
	Progress func(what, path string)
	// AllowRemote lets kustomizations fetch their remote resources and
	// bases (http(s) URLs, git repositories). Off, such a kustomization is
	// an error that names the resource, and nothing is fetched: a scan of
	// a stranger's pull request must not make the machine that runs it
	// send requests, or run git, where the stranger says.
	AllowRemote bool
	// KustomizeRoot, if set, is a directory that holds every scanned path
	// and under which kustomizations may read: the repository root, when
	// an overlay that names ../../base is scanned alone. Unset, a
	// kustomization reads only under the path given (a file's directory),
	// so that a hostile overlay cannot build a directory of the machine
	// running the scan.
	KustomizeRoot string
	// APIVersions are added to what charts see as
	// .Capabilities.APIVersions, beside the target's built-in APIs:
	// "group/version" or "group/version/Kind", as helm template's
	// --api-versions takes them.
	APIVersions []string
}

// kustomizationFiles are the names kustomize looks for in a directory.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Scan reads every path: a manifest file (YAML or JSON, any number of
// documents), "-" for standard input, or a directory. In a directory, a
// kustomization is built and a chart rendered, each as a whole, instead of
// their files being read one by one; elsewhere every *.yaml, *.yml and
// *.json file is read, recursively. Hidden directories (.git) are skipped.
func (s Files) Scan(ctx context.Context, paths []string) report.Result {
	var res report.Result
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			res.Errors = append(res.Errors, report.InputError{Path: p, Err: err.Error()})
			break
		}
		res.Merge(s.scanPath(ctx, p))
	}
	res.Sort()
	return res
}

func (s Files) scanPath(ctx context.Context, path string) report.Result {
	if path == "-" {
		return s.manifest("-", func() ([]byte, error) { return readLimited(s.Stdin) })
	}
	info, err := os.Stat(path)
	if err != nil {
		return failed(path, err)
	}
	if !info.IsDir() {
		// A file given is read under its directory: a symlink there is
		// followed only as far as that directory.
		root, err := NewRoot(filepath.Dir(path))
		if err != nil {
			return failed(path, err)
		}
		switch {
		case isKustomization(filepath.Base(path)):
			return s.kustomization(root, filepath.Dir(path))
		case filepath.Base(path) == "Chart.yaml":
			return s.chart(filepath.Dir(path))
		case strings.HasSuffix(path, ".tgz"):
			return s.chart(path)
		}
		return s.manifest(path, func() ([]byte, error) { return root.ReadFile(path, MaxFileSize) })
	}
	root, err := NewRoot(path)
	if err != nil {
		return failed(path, err)
	}
	var res report.Result
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			res.Errors = append(res.Errors, report.InputError{Path: p, Err: err.Error()})
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if p != path && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			switch {
			case hasFile(p, kustomizationFiles...):
				res.Merge(s.kustomization(root, p))
				return filepath.SkipDir
			case hasFile(p, "Chart.yaml"):
				res.Merge(s.chart(p))
				return filepath.SkipDir
			}
			return nil
		}
		// WalkDir follows no symlink; one to a directory is not walked
		// (its target, if inside, is walked on its own). Only a manifest's
		// name is read, and through root, which follows a symlink only to
		// a file inside and opens only regular files.
		if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" || ext == ".json" {
			res.Merge(s.manifest(p, func() ([]byte, error) { return root.ReadFile(p, MaxFileSize) }))
		}
		return nil
	})
	if err != nil {
		res.Errors = append(res.Errors, report.InputError{Path: path, Err: err.Error()})
	}
	return res
}

// manifest reads one file or stream of manifests.
func (s Files) manifest(path string, read func() ([]byte, error)) report.Result {
	s.progress("file", path)
	data, err := read()
	if reason, ok := IsSkip(err); ok {
		return report.Result{Skipped: []report.Skipped{{Path: path, Reason: reason}}}
	}
	if err != nil {
		return failed(path, err)
	}
	res := report.Result{Scanned: report.Scanned{Files: 1}}
	objs, err := s.Judge.readObjects(data)
	if tooLarge(err) {
		return report.Result{Errors: []report.InputError{{Path: path, Err: err.Error()}}}
	}
	if err != nil {
		res.Errors = append(res.Errors, report.InputError{Path: path, Err: err.Error()})
	}
	res.Scanned.Objects = len(objs)
	for _, o := range objs {
		res.Findings = append(res.Findings, s.Judge.Judge(o, report.Origin{Path: path, Line: o.Line})...)
	}
	return res
}

func (s Files) progress(what, path string) {
	if s.Progress != nil {
		s.Progress(what, path)
	}
}

func failed(path string, err error) report.Result {
	return report.Result{Errors: []report.InputError{{Path: path, Err: err.Error()}}}
}

func isKustomization(name string) bool {
	for _, k := range kustomizationFiles {
		if name == k {
			return true
		}
	}
	return false
}

// hasFile reports whether dir has a regular file, or a symlink, of one of
// the names. A symlink is judged where it is read: one out of the scanned
// directory makes a kustomization or chart that cannot be read, rather
// than a directory of manifests.
func hasFile(dir string, names ...string) bool {
	for _, n := range names {
		if info, err := os.Lstat(filepath.Join(dir, n)); err == nil && (info.Mode().IsRegular() || info.Mode()&fs.ModeSymlink != 0) {
			return true
		}
	}
	return false
}

// readLimited reads r whole, or fails past MaxFileSize.
func readLimited(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, errors.New("no standard input to read")
	}
	b, err := readAtMost(r, MaxFileSize, "the input")
	if tooLarge := (*TooLargeError)(nil); errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("larger than %d MiB: split it, or scan the directory it came from", MaxFileSize>>20)
	}
	return b, err
}
