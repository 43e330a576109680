// Package report is what a scan found, and how it is written: the
// findings with where each object came from, what could not be read, and
// the table, JSON, YAML, Markdown, SARIF and JUnit outputs of `sunset scan`.
// An UpgradeCheck carries a Result over the wire (status.scan), so it is a
// package apart from the scanners in package scan: the API's types, the
// CLI and the page read results without linking Kubernetes clients,
// kustomize or the Helm SDK.
package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/kube-sunset/sunset/catalog"
)

// Rules a finding can come from. They are SARIF rule ids and JUnit
// classnames too, so they are spelled as stable identifiers.
const (
	RuleRemovedAPI       = "removed-api"
	RuleDeprecatedAPI    = "deprecated-api"
	RuleDeprecatedField  = "deprecated-field"
	RuleCRDStoredVersion = "crd-stored-version"
	RuleAPIService       = "apiservice"
)

// Finding is one object that uses an API (or a field, or a stored version)
// that is deprecated or removed by the target release.
type Finding struct {
	// Severity is catalog.StateRemoved when the target release (or the
	// cluster already) no longer serves it, else catalog.StateDeprecated.
	Severity   string `json:"severity"`
	Rule       string `json:"rule"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	// DeprecatedIn and RemovedIn are releases such as "1.22".
	DeprecatedIn string `json:"deprecatedInRelease,omitempty"`
	RemovedIn    string `json:"removedInRelease,omitempty"`
	// AlreadyRemoved is true when the cluster's current release (when
	// known) no longer serves the API at all.
	AlreadyRemoved bool `json:"alreadyRemoved,omitempty"`
	// Replacement is the apiVersion and kind to move to, when known.
	Replacement string `json:"replacement,omitempty"`
	// Message says what is wrong and what to do, in one sentence.
	Message string `json:"message"`
	// Source is where the judgement came from: SourceCatalog,
	// SourceExtra, SourceCRD or SourceFieldRule.
	Source string `json:"source,omitempty"`
	Origin Origin `json:"origin"`
}

// Sources of a judgement.
const (
	// SourceCatalog is the built-in catalog of Kubernetes APIs.
	SourceCatalog = "catalog"
	// SourceExtra is an entry of the configured catalog.extra.
	SourceExtra = "extra"
	// SourceCRD is a CustomResourceDefinition read from the cluster: a
	// version it no longer serves, or marks deprecated.
	SourceCRD = "crd"
	// SourceFieldRule is a field rule.
	SourceFieldRule = "field-rule"
)

// Origin is where a finding's object comes from.
type Origin struct {
	// Path is the manifest file, the kustomization directory, or the chart
	// (directory or archive), as given or found under a given directory;
	// "-" is standard input. Empty for objects read from a cluster.
	Path string `json:"path,omitempty"`
	// Line is the line of the object in Path, or, for a kustomization, in
	// File; 0 when unknown. A chart's objects have none: their template
	// names them.
	Line int `json:"line,omitempty"`
	// File is the resource file a kustomization read the object from.
	File string `json:"file,omitempty"`
	// Template is the chart template that rendered the object, such as
	// "mychart/templates/ingress.yaml".
	Template string `json:"template,omitempty"`
	// Release and Revision name a Helm release in a cluster, as
	// "namespace/name" and its revision.
	Release  string `json:"release,omitempty"`
	Revision int    `json:"revision,omitempty"`
	// Object names an object read from a cluster, such as
	// "customresourcedefinitions/widgets.example.com".
	Object string `json:"object,omitempty"`
}

// String names the origin the way a person would look it up.
func (o Origin) String() string {
	at := func(path string, line int) string {
		if line > 0 {
			return fmt.Sprintf("%s:%d", path, line)
		}
		return path
	}
	switch {
	case o.Release != "":
		return fmt.Sprintf("helm release %s revision %d: %s", o.Release, o.Revision, at(o.Template, o.Line))
	case o.Object != "":
		return o.Object
	case o.Template != "":
		return fmt.Sprintf("%s: %s", o.Path, at(o.Template, o.Line))
	case o.File != "":
		return fmt.Sprintf("%s: %s", o.Path, at(o.File, o.Line))
	}
	return at(o.Path, o.Line)
}

// NotScanned is a part of a cluster the scan could not read, and why; the
// scan goes on without it.
type NotScanned struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Reason    string `json:"reason"`
}

func (n NotScanned) String() string {
	where := "cluster-wide"
	if n.Namespace != "" {
		where = "in namespace " + n.Namespace
	}
	return fmt.Sprintf("%s %s not scanned: %s", n.Resource, where, n.Reason)
}

// Skipped is an input a scan left unread on purpose, and why: a symlink
// out of the scanned directory, a named pipe, a device. It is a note, not
// an error: the scan is complete without it, since what it would have read
// is not part of what was given to scan.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func (s Skipped) String() string { return s.Path + ": " + s.Reason }

// InputError is an input that could not be read, parsed or rendered. A
// scan with one is incomplete, and the command fails.
type InputError struct {
	Path string `json:"path"`
	Err  string `json:"error"`
}

func (e InputError) String() string { return e.Path + ": " + e.Err }

// Scanned counts what a scan read, so that "no findings" can be told
// apart from "nothing read".
type Scanned struct {
	Files          int `json:"files"`
	Kustomizations int `json:"kustomizations"`
	Charts         int `json:"charts"`
	HelmReleases   int `json:"helmReleases"`
	CRDs           int `json:"customResourceDefinitions"`
	APIServices    int `json:"apiServices"`
	Objects        int `json:"objects"`
}

// Result is what a scan found.
type Result struct {
	TargetVersion string `json:"targetVersion"`
	// CurrentVersion is the cluster's release, when known.
	CurrentVersion string       `json:"currentVersion,omitempty"`
	Scanned        Scanned      `json:"scanned"`
	Findings       []Finding    `json:"findings"`
	NotScanned     []NotScanned `json:"notScanned"`
	Errors         []InputError `json:"errors"`
	// Skipped are the inputs left unread on purpose; absent when none.
	Skipped []Skipped `json:"skipped,omitempty"`
}

// Removed and Deprecated count the findings of each severity.
func (r Result) Removed() int {
	return r.count(catalog.StateRemoved)
}

// Deprecated counts the findings that are deprecated but still served at
// the target.
func (r Result) Deprecated() int {
	return r.count(catalog.StateDeprecated)
}

func (r Result) count(severity string) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == severity {
			n++
		}
	}
	return n
}

// Merge adds o's findings, gaps and errors to r's, and sorts them.
func (r *Result) Merge(o Result) {
	r.Findings = append(r.Findings, o.Findings...)
	r.NotScanned = append(r.NotScanned, o.NotScanned...)
	r.Errors = append(r.Errors, o.Errors...)
	r.Skipped = append(r.Skipped, o.Skipped...)
	s := &r.Scanned
	s.Files += o.Scanned.Files
	s.Kustomizations += o.Scanned.Kustomizations
	s.Charts += o.Scanned.Charts
	s.HelmReleases += o.Scanned.HelmReleases
	s.CRDs += o.Scanned.CRDs
	s.APIServices += o.Scanned.APIServices
	s.Objects += o.Scanned.Objects
	if r.CurrentVersion == "" {
		r.CurrentVersion = o.CurrentVersion
	}
	r.Sort()
}

// Sort puts removed before deprecated, then orders by where the object is,
// so that output is stable whatever order directories were walked in.
func (r *Result) Sort() {
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		if a.Severity != b.Severity {
			if a.Severity == catalog.StateRemoved {
				return -1
			}
			return 1
		}
		if c := a.Origin.compare(b.Origin); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	slices.SortStableFunc(r.Skipped, func(a, b Skipped) int { return strings.Compare(a.Path, b.Path) })
}

// compare orders origins by where they are, lines by number.
func (o Origin) compare(p Origin) int {
	return cmp.Or(strings.Compare(o.Release, p.Release), cmp.Compare(o.Revision, p.Revision), strings.Compare(o.Object, p.Object),
		strings.Compare(o.Path, p.Path), strings.Compare(o.File, p.File), strings.Compare(o.Template, p.Template), cmp.Compare(o.Line, p.Line))
}

// Severity is a finding's severity at target: removed when target no
// longer serves the API, deprecated when it is deprecated at target, and
// "" when neither: an API deprecated only after the target is not a
// finding yet. Scanners judge with it, and At judges again with it, so a
// result narrowed to a nearer target reads as a scan for it would.
func Severity(target catalog.Release, deprecatedIn, removedIn string) string {
	if r, err := catalog.ParseRelease(removedIn); err == nil && !target.Less(r) {
		return catalog.StateRemoved
	}
	if deprecatedIn == "" {
		// Known to the catalog or a rule without a release: deprecated now.
		return catalog.StateDeprecated
	}
	if d, err := catalog.ParseRelease(deprecatedIn); err == nil && !target.Less(d) {
		return catalog.StateDeprecated
	}
	return ""
}

// At is r judged against target instead of the target it was scanned
// for: findings whose API is neither deprecated nor removed by target
// drop out, and removed ones become deprecated before their release.
// Findings with no release (a CRD version marked deprecated or no longer
// served) keep their severity.
func (r Result) At(target catalog.Release) Result {
	out := r
	out.TargetVersion = target.String()
	out.Findings = nil
	for _, f := range r.Findings {
		if f.DeprecatedIn != "" || f.RemovedIn != "" {
			f.Severity = Severity(target, f.DeprecatedIn, f.RemovedIn)
			if f.Severity == "" {
				continue
			}
			switch f.Rule {
			case RuleRemovedAPI, RuleDeprecatedAPI:
				f.Rule = RuleDeprecatedAPI
				if f.Severity == catalog.StateRemoved {
					f.Rule = RuleRemovedAPI
				}
			}
		}
		out.Findings = append(out.Findings, f)
	}
	out.Sort()
	return out
}
