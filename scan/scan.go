// Package scan finds deprecated and removed Kubernetes APIs in what is
// about to be applied rather than in what was requested: manifests,
// kustomizations and Helm charts on disk, and in a cluster the latest
// deployed revision of each Helm release, the versions CRDs still store
// objects at, and APIServices. Traffic answers "who calls it"; a scan
// answers "what will the next apply or helm upgrade send", which traffic
// cannot show for a chart not upgraded since, or a CronJob that runs once a
// month.
//
// Objects are judged by the same catalog and field rules as traffic. Only
// an object's own apiVersion and kind count: the copy of an older manifest
// in kubectl's last-applied-configuration annotation, and managedFields,
// say how an object was once written, not what will be sent next.
package scan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fieldrule"
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
	Origin  Origin `json:"origin"`
}

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
	r.sort()
}

// sort puts removed before deprecated, then orders by where the object is,
// so that output is stable whatever order directories were walked in.
func (r *Result) sort() {
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
}

// compare orders origins by where they are, lines by number.
func (o Origin) compare(p Origin) int {
	return cmp.Or(strings.Compare(o.Release, p.Release), cmp.Compare(o.Revision, p.Revision), strings.Compare(o.Object, p.Object),
		strings.Compare(o.Path, p.Path), strings.Compare(o.File, p.File), strings.Compare(o.Template, p.Template), cmp.Compare(o.Line, p.Line))
}

// Judge decides which objects are findings, against one target release.
type Judge struct {
	Catalog *catalog.Catalog
	// Fields are the field rules; rules for a subresource (such as
	// nodes/status) never apply to a manifest.
	Fields *fieldrule.Set
	Target catalog.Release
	// Current is the cluster's release, if known; it tells removed-by-the-
	// upgrade from already removed.
	Current catalog.Release
}

// Object is one Kubernetes object found in a manifest or a release.
type Object struct {
	APIVersion, Kind, Name, Namespace string
	// Line is the object's first line in its document stream; 0 if unknown.
	Line int
	// JSON is the object, for field rules; nil when no rule looks at its
	// kind (see Judge.wantsBody).
	JSON []byte
}

// Judge returns the findings for one object, with origin set.
func (j Judge) Judge(obj Object, origin Origin) []Finding {
	group, version := splitAPIVersion(obj.APIVersion)
	var out []Finding
	base := Finding{APIVersion: obj.APIVersion, Kind: obj.Kind, Name: obj.Name, Namespace: obj.Namespace, Origin: origin}
	if e, ok := j.Catalog.LookupKind(group, version, obj.Kind); ok {
		if f, ok := j.apiFinding(e, base); ok {
			out = append(out, f)
		}
	}
	if obj.JSON != nil && j.Fields != nil {
		resource := j.resource(group, version, obj.Kind)
		for _, r := range j.Fields.Match(group, version, resource, "", "create", obj.JSON) {
			f := base
			f.Rule, f.Message, f.DeprecatedIn, f.RemovedIn = RuleDeprecatedField, r.Message, r.DeprecatedIn, r.RemovedIn
			f.Severity = j.severity(catalog.NormalizeRelease(r.DeprecatedIn), catalog.NormalizeRelease(r.RemovedIn))
			if f.Severity != "" {
				out = append(out, f)
			}
		}
	}
	return out
}

// WantsBody reports whether a field rule looks at objects of this kind, so
// that only those are turned into JSON.
func (j Judge) WantsBody(apiVersion, kind string) bool {
	if j.Fields == nil {
		return false
	}
	group, version := splitAPIVersion(apiVersion)
	return j.Fields.Selects(group, version, j.resource(group, version, kind), "", "create")
}

// resource is the resource of a kind: the catalog's when it has the kind,
// else the lowercase plural Kubernetes derives for most kinds.
func (j Judge) resource(group, version, kind string) string {
	if e, ok := j.Catalog.LookupKind(group, version, kind); ok {
		return e.Resource
	}
	plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	return plural.Resource
}

func (j Judge) apiFinding(e catalog.Entry, f Finding) (Finding, bool) {
	f.Severity = j.severity(e.DeprecatedIn, e.RemovedIn)
	if f.Severity == "" {
		return f, false
	}
	f.Rule = RuleDeprecatedAPI
	if f.Severity == catalog.StateRemoved {
		f.Rule = RuleRemovedAPI
	}
	f.DeprecatedIn, f.RemovedIn, f.Message = e.DeprecatedIn, e.RemovedIn, e.Warning()
	if r := e.Replacement; r != nil {
		f.Replacement = catalog.GroupVersion(r.Group, r.Version) + " " + r.Kind
	}
	if removed := e.Removed(); !removed.IsZero() && !j.Current.IsZero() && !j.Current.Less(removed) {
		f.AlreadyRemoved = true
	}
	return f, true
}

// severity is removed when the target (or the cluster) no longer serves
// the API, deprecated when it is deprecated at the target, and "" when
// neither: an API deprecated only after the target is not a finding yet.
func (j Judge) severity(deprecatedIn, removedIn string) string {
	if r, err := catalog.ParseRelease(removedIn); err == nil && !j.Target.Less(r) {
		return catalog.StateRemoved
	}
	if deprecatedIn == "" {
		// Known to the catalog or a rule without a release: deprecated now.
		return catalog.StateDeprecated
	}
	if d, err := catalog.ParseRelease(deprecatedIn); err == nil && !j.Target.Less(d) {
		return catalog.StateDeprecated
	}
	return ""
}

func splitAPIVersion(apiVersion string) (group, version string) {
	if g, v, ok := strings.Cut(apiVersion, "/"); ok {
		return g, v
	}
	return "", apiVersion
}
