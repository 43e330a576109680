package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/scan"
)

// chart rewrites the files of a chart directory a render reads, and of
// the unpacked subcharts under its charts/: every template (a file under
// templates/ but partials, named _*, and NOTES.txt, whatever its
// extension) and every CRD under crds/. A template is text for Helm's
// template engine, not YAML, so only a line is ever changed: a top-level
// `apiVersion: <literal>` whose document's kind is literal too, when the
// move changes no field. A templated apiVersion or kind, and a move that
// changes fields, are listed for a person. A file under crds/ is not
// templated: it is rewritten as a manifest.
func (r *run) chart(root scan.Root, dir string) {
	if !r.firstDir(dir) {
		return
	}
	r.chartFiles(filepath.Join(dir, "templates"), func(p, name string) {
		if !strings.HasPrefix(name, "_") && name != "NOTES.txt" {
			r.template(root, p)
		}
	})
	r.chartFiles(filepath.Join(dir, "crds"), func(p, name string) {
		// Helm installs only these from crds/.
		if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" || ext == ".json" {
			r.manifest(root, p, false)
		}
	})
	subcharts := filepath.Join(dir, "charts")
	entries, err := os.ReadDir(subcharts)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(subcharts, e.Name())
		switch {
		case e.IsDir() && hasFile(p, "Chart.yaml"):
			r.chart(root, p)
		case strings.HasSuffix(e.Name(), ".tgz"):
			r.skip(p, 0, "a packed subchart is not rewritten: fix the chart it was packed from")
		}
	}
}

// chartFiles calls visit with each file under dir, as Helm loads a chart:
// hidden files and directories left out.
func (r *run) chartFiles(dir string, visit func(path, name string)) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return nil
			}
			r.skip(p, 0, err.Error())
			return nil
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			visit(p, d.Name())
		}
		return nil
	})
	if err != nil {
		r.skip(dir, 0, err.Error())
	}
}

// firstDir reports whether dir is visited for the first time.
func (r *run) firstDir(dir string) bool {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	if r.seen["dir:"+real] {
		return false
	}
	r.seen["dir:"+real] = true
	return true
}

// topLevel is a top-level apiVersion or kind line of a template.
var topLevel = regexp.MustCompile(`(?m)^(apiVersion|kind):[ \t]*(.*?)[ \t]*(?:[ \t]#.*)?\r?$`)

// templateField is the value of such a line, unquoted.
type templateField struct {
	line      int
	value     string
	templated bool
}

func (r *run) template(root scan.Root, path string) {
	data, real, ok := r.read(root, path)
	if !ok {
		return
	}
	out := bytes.Clone(data)
	var changes []Change
	for _, doc := range splitDocuments(data) {
		fields := map[string]templateField{}
		for _, m := range topLevel.FindAllSubmatchIndex(doc.data, -1) {
			key := string(doc.data[m[2]:m[3]])
			if _, dup := fields[key]; dup {
				continue
			}
			value := string(doc.data[m[4]:m[5]])
			if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
				value = value[1 : len(value)-1]
			}
			fields[key] = templateField{
				line: doc.line + bytes.Count(doc.data[:m[0]], []byte("\n")), value: value,
				templated: strings.Contains(value, "{{"),
			}
		}
		av, hasAV := fields["apiVersion"]
		kind, hasKind := fields["kind"]
		if !hasAV || !hasKind || av.value == "" || kind.value == "" {
			continue
		}
		switch {
		case av.templated && !kind.templated:
			if r.kindMoves(kind.value) {
				r.skip(path, av.line, fmt.Sprintf("the apiVersion of %s is templated (%s): a template's logic is not rewritten; check what it renders for the target and edit it by hand", kind.value, av.value))
			}
		case kind.templated && !av.templated:
			if r.apiVersionMoves(av.value) {
				r.skip(path, av.line, fmt.Sprintf("the kind of %s is templated (%s): a template's logic is not rewritten; check what it renders for the target and edit it by hand", av.value, kind.value))
			}
		case !av.templated && !kind.templated && r.f.Moves(av.value, kind.value):
			group, version := catalog.SplitAPIVersion(av.value)
			c, ok := r.f.lookup(group, version, kind.value)
			switch {
			case !ok:
				r.skip(path, av.line, fmt.Sprintf("%s %s: Sunset knows no replacement to move it to", av.value, kind.value))
			case c.Method == convert.Refused:
				r.skip(path, av.line, fmt.Sprintf("%s %s is not moved: %s", av.value, kind.value, c.Reason))
			case c.Method != convert.SameFields:
				r.skip(path, av.line, fmt.Sprintf("%s %s: moving it to %s is a move that changes fields or refuses some objects (%s), which a template is not rewritten for; check it and edit it by hand", av.value, kind.value, c.To, c.Reason))
			case c.To.Kind != kind.value:
				r.skip(path, av.line, fmt.Sprintf("%s %s: moving it to %s changes its kind, which a template is not rewritten for; edit it by hand", av.value, kind.value, c.To))
			default:
				changes = append(changes, Change{Kind: kind.value, Line: av.line, From: av.value, To: c.To.APIVersion()})
				out = replaceLine(out, av.line, av.value, c.To.APIVersion())
			}
		}
	}
	r.keep(path, real, data, out, changes)
}

// replaceLine replaces the first from on line n (1-based) of data.
func replaceLine(data []byte, n int, from, to string) []byte {
	lines := splitLines(data)
	lines[n-1] = bytes.Replace(lines[n-1], []byte(from), []byte(to), 1)
	return bytes.Join(lines, nil)
}

// kindMoves reports whether some API of kind moves, so that a templated
// apiVersion may be one that does.
func (r *run) kindMoves(kind string) bool {
	for _, c := range r.f.Conversions.Conversions() {
		if c.From.Kind == kind && r.f.Moves(c.From.APIVersion(), kind) {
			return true
		}
	}
	return false
}

// apiVersionMoves reports whether some kind of apiVersion moves.
func (r *run) apiVersionMoves(av string) bool {
	for _, c := range r.f.Conversions.Conversions() {
		if c.From.APIVersion() == av && r.f.Moves(av, c.From.Kind) {
			return true
		}
	}
	return false
}
