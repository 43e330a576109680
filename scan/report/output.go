package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/internal/plural"
)

// Formats are the values of `sunset scan -o`.
var Formats = []string{"table", "wide", "json", "yaml", "markdown", "sarif", "junit"}

// Write writes r in format. Texts from the scanned files (names, paths,
// catalog entries of CRDs) are escaped by escape in the table, wide and
// markdown formats, so that a hostile manifest cannot drive the terminal
// (or the page the markdown is pasted in); JSON, YAML, SARIF and JUnit
// keep them exact.
func (r Result) Write(w io.Writer, format, version string, escape func(string) string) error {
	switch format {
	case "table", "wide":
		return r.writeTable(w, format == "wide", escape)
	case "json":
		b, err := json.MarshalIndent(r.withEmptyLists(), "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(r.withEmptyLists())
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "markdown":
		return r.writeMarkdown(w, escape)
	case "sarif":
		return r.writeSARIF(w, version)
	case "junit":
		return r.writeJUnit(w)
	}
	return fmt.Errorf("-o %q is not one of %s", format, strings.Join(Formats, ", "))
}

// withEmptyLists writes absent lists as [] rather than null, for jq users.
func (r Result) withEmptyLists() Result {
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	if r.NotScanned == nil {
		r.NotScanned = []NotScanned{}
	}
	if r.Errors == nil {
		r.Errors = []InputError{}
	}
	return r
}

// Status is a finding's state in words: "removed in 1.22",
// "deprecated in 1.33".
func (f Finding) Status() string {
	switch {
	case f.Severity == catalog.StateRemoved && f.RemovedIn != "":
		return "removed in " + f.RemovedIn
	case f.Severity == catalog.StateRemoved:
		return "removed"
	case f.RemovedIn != "":
		return fmt.Sprintf("deprecated, removed in %s", f.RemovedIn)
	case f.DeprecatedIn != "":
		return "deprecated in " + f.DeprecatedIn
	}
	return "deprecated"
}

func (r Result) writeTable(w io.Writer, wide bool, escape func(string) string) error {
	if err := r.writeRows(w, wide, escape); err != nil {
		return err
	}
	for _, s := range r.Skipped {
		if _, err := fmt.Fprintf(w, "Skipped %s\n", escape(s.String())); err != nil {
			return err
		}
	}
	return nil
}

func (r Result) writeRows(w io.Writer, wide bool, escape func(string) string) error {
	if len(r.Findings) == 0 {
		_, err := fmt.Fprintf(w, "No deprecated or removed APIs found in %s.\n", r.Scanned)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	header := "ORIGIN\tKIND\tNAME\tAPI VERSION\tSTATUS\tREPLACEMENT"
	if wide {
		header = "ORIGIN\tNAMESPACE\tKIND\tNAME\tAPI VERSION\tSTATUS\tREPLACEMENT\tRULE\tSOURCE\tMESSAGE"
	}
	fmt.Fprintln(tw, header)
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return escape(s)
	}
	for _, f := range r.Findings {
		status := f.Status()
		if f.AlreadyRemoved {
			status += " (already)"
		}
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", escape(f.Origin.String()), dash(f.Namespace), escape(f.Kind), dash(f.Name),
				escape(f.APIVersion), escape(status), dash(f.Replacement), dash(f.Rule), dash(f.Source), escape(f.Message))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", escape(f.Origin.String()), escape(f.Kind), dash(f.Name), escape(f.APIVersion), escape(status), dash(f.Replacement))
	}
	return tw.Flush()
}

// String says what was read, for "nothing found in ...".
func (s Scanned) String() string {
	var parts []string
	add := func(n int, one, many string) {
		if n == 1 {
			parts = append(parts, "1 "+one)
		} else if n > 1 {
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(s.Files, "file", "files")
	add(s.Kustomizations, "kustomization", "kustomizations")
	add(s.Charts, "chart", "charts")
	add(s.HelmReleases, "Helm release", "Helm releases")
	add(s.CRDs, "CRD", "CRDs")
	add(s.APIServices, "APIService", "APIServices")
	what := strings.Join(parts, ", ")
	if what == "" {
		what = "nothing"
	}
	return fmt.Sprintf("%s (%d objects)", what, s.Objects)
}

// writeMarkdown writes a pull-request comment: the verdict, then a table.
// Cell text is escaped by escape, as in the table (markdown is read on a
// terminal too), then for GitHub-flavoured Markdown.
func (r Result) writeMarkdown(w io.Writer, escape func(string) string) error {
	mdCell := func(s string) string { return mdCell(escape(s)) }
	mdCode := func(s string) string { return mdCode(escape(s)) }
	var b strings.Builder
	fmt.Fprintf(&b, "### Kubernetes API scan for %s\n\n", r.TargetVersion)
	fmt.Fprintf(&b, "%s\n\n", r.Verdict(false))
	if len(r.Findings) > 0 {
		b.WriteString("| Status | Origin | Kind | Name | API version | Replacement |\n|---|---|---|---|---|---|\n")
		for _, f := range r.Findings {
			icon := ":warning:"
			if f.Severity == catalog.StateRemoved {
				icon = ":x:"
			}
			fmt.Fprintf(&b, "| %s %s | `%s` | %s | %s | `%s` | %s |\n", icon, mdCell(f.Status()), mdCode(f.Origin.String()), mdCell(f.Kind),
				mdCell(f.Name), mdCode(f.APIVersion), mdCell(f.Replacement))
		}
		b.WriteString("\n")
	}
	for _, n := range r.NotScanned {
		fmt.Fprintf(&b, "- Not scanned: %s\n", mdCell(n.String()))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "- Error: %s\n", mdCell(e.String()))
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "- Skipped: %s\n", mdCell(s.String()))
	}
	fmt.Fprintf(&b, "\n<sub>Scanned %s.</sub>\n", mdCell(r.Scanned.String()))
	_, err := io.WriteString(w, b.String())
	return err
}

var mdEscaper = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;", "`", "'", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`)

func mdCell(s string) string { return mdEscaper.Replace(s) }

// mdCode is text for a code span, where only the pipe (a table's) and the
// backtick need care.
func mdCode(s string) string {
	return strings.NewReplacer("|", `\|`, "`", "'", "\n", " ", "\r", " ").Replace(s)
}

// Verdict is the sentence a scan ends with. warningsAsErrors makes
// deprecated findings fail, as the exit code does.
func (r Result) Verdict(warningsAsErrors bool) string {
	removed, deprecated := r.Removed(), r.Deprecated()
	switch {
	case len(r.Errors) > 0:
		return fmt.Sprintf("INCOMPLETE: %d input%s could not be read; fix %s and scan again.", len(r.Errors), plural.S(len(r.Errors)), them(len(r.Errors)))
	case removed > 0:
		return fmt.Sprintf("NOT SAFE to upgrade to %s: %d object%s use%s APIs removed in or before %s.", r.TargetVersion, removed, plural.S(removed), verbS(removed), r.TargetVersion)
	case deprecated > 0 && warningsAsErrors:
		return fmt.Sprintf("FAILED (--warnings-as-errors): no object uses an API removed in or before %s, but %d use%s deprecated APIs.", r.TargetVersion, deprecated, verbS(deprecated))
	case deprecated > 0:
		return fmt.Sprintf("Safe to upgrade to %s: no object uses an API removed in or before it; %d use%s deprecated APIs.", r.TargetVersion, deprecated, verbS(deprecated))
	}
	return fmt.Sprintf("Safe to upgrade to %s: no object uses a deprecated API.", r.TargetVersion)
}

func verbS(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
