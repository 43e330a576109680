package helmchart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/ignore"

	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/report"
)

// Helm's own loader follows every symlink of a chart directory, to
// anywhere, and would read a named pipe's open for ever; a scan of a
// stranger's chart must do neither. So the scan reads the chart's files
// itself, as a scan reads files (scan.Root: symlinks only to files inside
// the chart, regular files only, scan.MaxChartSize in all), follows a
// symlink in an archive only to a file of the same archive, unpacks
// subchart archives the same way, and hands Helm the files packed as one
// archive in memory, which Helm loads without touching the disk.

// chartFile is a file of a chart, named relative to its root with "/".
type chartFile struct {
	name string
	data []byte
}

type budget struct{ left int64 }

func (b *budget) take(n int) error {
	b.left -= int64(n)
	if b.left < 0 {
		return &scan.TooLargeError{What: "the chart", Limit: scan.MaxChartSize}
	}
	return nil
}

// load loads the chart directory or archive at p.
func load(p string) (chart.Charter, []report.Skipped, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, nil, err
	}
	b := &budget{left: scan.MaxChartSize}
	var files []chartFile
	var skipped []report.Skipped
	if info.IsDir() {
		root, err := scan.NewRoot(p)
		if err != nil {
			return nil, nil, err
		}
		files, skipped, err = readDir(root, p, b)
		if err != nil {
			return nil, skipped, err
		}
	} else {
		root, err := scan.NewRoot(filepath.Dir(p))
		if err != nil {
			return nil, nil, err
		}
		data, err := root.ReadFile(p, scan.MaxChartSize)
		if err != nil {
			return nil, nil, err
		}
		files, skipped, err = readArchive(data, p, b)
		if err != nil {
			return nil, skipped, err
		}
	}
	files, more, err := unpackSubcharts(files, p, b)
	skipped = append(skipped, more...)
	if err != nil {
		return nil, skipped, err
	}
	packed, err := pack(files)
	if err != nil {
		return nil, skipped, err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(packed))
	return ch, skipped, err
}

// readDir reads a chart directory as Helm's loader does (.helmignore
// applied), through root.
func readDir(root scan.Root, dir string, b *budget) ([]chartFile, []report.Skipped, error) {
	rules := ignore.Empty()
	if data, err := root.ReadFile(filepath.Join(dir, ignore.HelmIgnore), 1<<20); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
	}
	rules.AddDefaults()
	var files []chartFile
	var skipped []report.Skipped
	visited := map[string]bool{}
	var walk func(lexical, rel string) error
	walk = func(lexical, rel string) error {
		entries, err := os.ReadDir(lexical)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p, n := filepath.Join(lexical, e.Name()), path.Join(rel, e.Name())
			real, info, err := root.Resolve(p)
			if reason, ok := scan.IsSkip(err); ok {
				skipped = append(skipped, report.Skipped{Path: filepath.Join(dir, filepath.FromSlash(n)), Reason: reason})
				continue
			}
			if err != nil {
				return err
			}
			if rules.Ignore(n, info) {
				continue
			}
			if info.IsDir() {
				if visited[real] {
					continue
				}
				visited[real] = true
				if err := walk(p, n); err != nil {
					return err
				}
				continue
			}
			data, err := root.ReadFile(p, b.left)
			if reason, ok := scan.IsSkip(err); ok {
				skipped = append(skipped, report.Skipped{Path: filepath.Join(dir, filepath.FromSlash(n)), Reason: reason})
				continue
			}
			var tooLarge *scan.TooLargeError
			if errors.As(err, &tooLarge) {
				return &scan.TooLargeError{What: "the chart", Limit: scan.MaxChartSize}
			}
			if err != nil {
				return err
			}
			if err := b.take(len(data)); err != nil {
				return err
			}
			files = append(files, chartFile{name: n, data: data})
		}
		return nil
	}
	if real, _, err := root.Resolve(dir); err == nil {
		visited[real] = true
	}
	err := walk(dir, "")
	return files, skipped, err
}

// readArchive reads a chart archive (gzipped tar, its files under one
// top directory) whole, inflating at most what is left of the budget. A
// symlink or hard link is followed only to a regular file of the same
// chart in the archive; other entries than files are skipped.
func readArchive(data []byte, where string, b *budget) ([]chartFile, []report.Skipped, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("not a chart archive: %w", err)
	}
	lim := scan.NewBoundedReader(zr, b.left)
	tr := tar.NewReader(lim)
	byName := map[string]int{}
	links := map[string]string{}
	var files []chartFile
	var skipped []report.Skipped
	skip := func(name, reason string) {
		skipped = append(skipped, report.Skipped{Path: where + "/" + name, Reason: reason})
	}
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if lim.Over() {
			return nil, skipped, &scan.TooLargeError{What: "the chart", Limit: scan.MaxChartSize}
		}
		if err != nil {
			return nil, skipped, fmt.Errorf("reading the chart archive: %w", err)
		}
		name, ok := inChart(hd.Name)
		if !ok {
			return nil, skipped, fmt.Errorf("the chart archive has a path outside the chart: %q", hd.Name)
		}
		switch hd.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader, tar.TypeXHeader:
		case tar.TypeReg, '\x00': // '\x00' is the old spelling of a regular file (TypeRegA)
			d, err := io.ReadAll(tr)
			if lim.Over() {
				return nil, skipped, &scan.TooLargeError{What: "the chart", Limit: scan.MaxChartSize}
			}
			if err != nil {
				return nil, skipped, err
			}
			if err := b.take(len(d)); err != nil {
				return nil, skipped, err
			}
			byName[name] = len(files)
			files = append(files, chartFile{name: name, data: d})
		case tar.TypeSymlink:
			target := path.Join(path.Dir(name), hd.Linkname)
			if path.IsAbs(hd.Linkname) || target == ".." || strings.HasPrefix(target, "../") {
				skip(name, "a symlink out of the chart: not followed")
				continue
			}
			links[name] = target
		case tar.TypeLink:
			target, ok := inChart(hd.Linkname)
			if !ok {
				skip(name, "a hard link out of the chart: not followed")
				continue
			}
			links[name] = target
		default:
			skip(name, "not a regular file: skipped")
		}
	}
	names := make([]string, 0, len(links))
	for n := range links {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		target := links[n]
		for hops := 0; hops < 10; hops++ {
			next, ok := links[target]
			if !ok {
				break
			}
			target = next
		}
		i, ok := byName[target]
		if !ok {
			skip(n, "a link to no file of the chart: not followed")
			continue
		}
		if err := b.take(len(files[i].data)); err != nil {
			return nil, skipped, err
		}
		files = append(files, chartFile{name: n, data: files[i].data})
	}
	if len(files) == 0 {
		return nil, skipped, errors.New("no files in the chart archive")
	}
	return files, skipped, nil
}

// inChart is an archive entry's name in its chart: without the top
// directory, as Helm names it; ok is false for one outside it.
func inChart(name string) (string, bool) {
	name = strings.ReplaceAll(name, "\\", "/")
	_, rest, found := strings.Cut(name, "/")
	if !found {
		return "", false
	}
	rest = path.Clean(rest)
	if path.IsAbs(rest) || rest == "." || rest == ".." || strings.HasPrefix(rest, "../") {
		return "", false
	}
	return rest, true
}

// unpackSubcharts replaces each subchart archive (charts/x.tgz, at any
// depth) with its files in a directory Helm loads as the subchart.
func unpackSubcharts(files []chartFile, where string, b *budget) ([]chartFile, []report.Skipped, error) {
	var skipped []report.Skipped
	for i := 0; i < len(files); i++ {
		f := files[i]
		if path.Base(path.Dir(f.name)) != "charts" || path.Ext(f.name) != ".tgz" {
			continue
		}
		sub, s, err := readArchive(f.data, where+"/"+f.name, b)
		skipped = append(skipped, s...)
		if err != nil {
			return nil, skipped, fmt.Errorf("%s: %w", f.name, err)
		}
		files = append(files[:i], files[i+1:]...)
		i--
		for _, sf := range sub {
			files = append(files, chartFile{name: f.name + ".d/" + sf.name, data: sf.data})
		}
	}
	return files, skipped, nil
}

// pack writes files as a chart archive, uncompressed inside its gzip.
func pack(files []chartFile) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: "chart/" + f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
