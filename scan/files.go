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
		switch {
		case isKustomization(filepath.Base(path)):
			return s.kustomization(filepath.Dir(path))
		case filepath.Base(path) == "Chart.yaml":
			return s.chart(filepath.Dir(path))
		case strings.HasSuffix(path, ".tgz"):
			return s.chart(path)
		}
		return s.manifest(path, func() ([]byte, error) { return readFile(path) })
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
				res.Merge(s.kustomization(p))
				return filepath.SkipDir
			case hasFile(p, "Chart.yaml"):
				res.Merge(s.chart(p))
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" || ext == ".json" {
			res.Merge(s.manifest(p, func() ([]byte, error) { return readFile(p) }))
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
	if err != nil {
		return failed(path, err)
	}
	res := report.Result{Scanned: report.Scanned{Files: 1}}
	objs, err := s.Judge.readObjects(data)
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

func hasFile(dir string, names ...string) bool {
	for _, n := range names {
		if info, err := os.Stat(filepath.Join(dir, n)); err == nil && !info.IsDir() {
			return true
		}
	}
	return false
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	b, err := readLimited(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return b, err
}

// readLimited reads r whole, or fails past MaxFileSize.
func readLimited(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, errors.New("no standard input to read")
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("larger than %d MiB: split it, or scan the directory it came from", MaxFileSize>>20)
	}
	return b, nil
}
