package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/fix/manifest"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/report"
)

// fix is `sunset scan --fix`: it moves every object the scan would report
// as deprecated or removed at the target to the replacement the scan
// names, in the files themselves, and lists what it left. Anything left
// makes it exit 1; a person has to decide about it.
func (s *ScanRequest) fix(ctx context.Context, out Output) error {
	cat, err := catalog.New(s.Catalog)
	if err != nil {
		return err
	}
	rules, err := fieldrule.New(s.FieldRules)
	if err != nil {
		return err
	}
	table := convert.New(cat)
	j := scan.Judge{Catalog: cat, Fields: rules, Target: s.target, Current: s.current, Conversions: table}
	f := manifest.Fixer{Conversions: table, DryRun: s.DryRun, Moves: func(apiVersion, kind string) bool {
		for _, finding := range j.Judge(scan.Object{APIVersion: apiVersion, Kind: kind}, report.Origin{}) {
			if finding.Rule == report.RuleDeprecatedAPI || finding.Rule == report.RuleRemovedAPI {
				return true
			}
		}
		return false
	}}
	// The scan reads the files before they are rewritten, so that every
	// object it reports is either moved by the fix or listed.
	scanned, err := s.run(ctx, s.target)
	if err != nil {
		return err
	}
	if !s.current.IsZero() {
		f.NotServed = notServed(cat, s.current)
	}
	res := f.Fix(ctx, s.Paths)
	res.CheckFound(foundFiles(scanned))
	changes := 0
	for _, file := range res.Rewritten {
		changes += len(file.Changes)
		if s.DryRun {
			d, err := file.Diff()
			if err != nil {
				return err
			}
			writeDiff(out.Out, d)
			continue
		}
		fmt.Fprintln(out.Out, "rewrote", Terminal(file.Path))
		for _, c := range file.Changes {
			fmt.Fprintln(out.Out, "  "+Terminal(c.String()))
		}
	}
	for _, n := range res.NotRewritten {
		fmt.Fprintln(out.Out, "not rewritten:", Terminal(n.String()))
	}
	fmt.Fprintln(out.Out, fixSummary(res, changes, s.DryRun))
	if len(res.NotRewritten) > 0 {
		return &ExitCodeError{Code: ExitError, Err: fmt.Errorf("%d files or objects not rewritten", len(res.NotRewritten))}
	}
	return nil
}

// notServed says why a replacement cannot be moved to at current, the
// cluster's release: the release that introduced it is later. That is
// the catalog's introducedIn for an API it lists, else, for an API never
// deprecated, the latest release that deprecated an API in its favour
// (Kubernetes deprecates an API once its replacement is served).
func notServed(cat *catalog.Catalog, current catalog.Release) func(convert.GVK) string {
	return func(to convert.GVK) string {
		var since catalog.Release
		if e, ok := cat.LookupKind(to.Group, to.Version, to.Kind); ok && e.IntroducedIn != "" {
			since, _ = catalog.ParseRelease(e.IntroducedIn)
		} else {
			for _, e := range cat.Entries() {
				if r := e.Replacement; r != nil && r.Group == to.Group && r.Version == to.Version && r.Kind == to.Kind && since.Less(e.Deprecated()) {
					since = e.Deprecated()
				}
			}
		}
		if since.IsZero() || !current.Less(since) {
			return ""
		}
		return fmt.Sprintf("its replacement %s is not served by %s (it is from %s); upgrade first, or drop --current-version", to, current, since)
	}
}

// foundFiles are the files of the objects a scan reports as ones to move.
func foundFiles(res report.Result) []manifest.Found {
	var found []manifest.Found
	for _, f := range res.Findings {
		if f.Rule != report.RuleDeprecatedAPI && f.Rule != report.RuleRemovedAPI {
			continue
		}
		o := f.Origin
		path, line := o.Path, o.Line
		switch {
		case path == "" || path == "-":
			continue
		case o.Template != "":
			// "chart/templates/x.yaml", named from the chart's
			// own name rather than its directory's.
			_, rel, _ := strings.Cut(filepath.ToSlash(o.Template), "/")
			path, line = filepath.Join(path, filepath.FromSlash(rel)), 0
		case o.File != "":
			path = filepath.Join(path, o.File)
		}
		found = append(found, manifest.Found{Path: path, Line: line, APIVersion: f.APIVersion, Kind: f.Kind})
	}
	return found
}

func fixSummary(res manifest.Result, changes int, dryRun bool) string {
	var line string
	switch {
	case changes == 0:
		line = fmt.Sprintf("Nothing to rewrite in %s read.", count(res.Files, "file"))
	case dryRun:
		line = fmt.Sprintf("Dry run: %s to %s; nothing was written.", count(changes, "change"), count(len(res.Rewritten), "file"))
	default:
		line = fmt.Sprintf("%s written to %s.", count(changes, "change"), count(len(res.Rewritten), "file"))
	}
	if n := len(res.NotRewritten); n > 0 {
		line += fmt.Sprintf(" %d not rewritten, listed above.", n)
	}
	return line
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeDiff prints a unified diff as it is, so that it applies with
// patch, except a line holding a control character other than a tab (a
// chart template is not parsed, and may): that line is escaped as
// Terminal does.
func writeDiff(w io.Writer, d string) {
	for _, l := range strings.SplitAfter(d, "\n") {
		body := strings.TrimRight(l, "\r\n")
		if strings.ContainsFunc(body, func(r rune) bool {
			return r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Bidi_Control, r) || r == unicode.ReplacementChar)
		}) {
			l = Terminal(body) + l[len(body):]
		}
		_, _ = io.WriteString(w, l) // as fmt.Fprint: output errors surface when the command exits
	}
}
