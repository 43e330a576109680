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
//
// What a scan found, and its output formats, are package report's, which
// the API's types carry without this package; charts are rendered by
// package helmchart, which alone links the Helm SDK, through
// ChartRenderer.
package scan

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/scan/report"
)

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
	// Conversions names each finding's replacement, so that the scan and a
	// fix never disagree on it; nil builds it from Catalog for each
	// finding, which is correct but slower.
	Conversions *convert.Table
	// CRDs are the cluster's CustomResourceDefinitions, when a cluster is
	// scanned: an object of a version they declare is judged by them, not
	// by the catalog. Nil without a cluster.
	CRDs *CRDVersions
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
func (j Judge) Judge(obj Object, origin report.Origin) []report.Finding {
	group, version := catalog.SplitAPIVersion(obj.APIVersion)
	var out []report.Finding
	base := report.Finding{APIVersion: obj.APIVersion, Kind: obj.Kind, Name: obj.Name, Namespace: obj.Namespace, Origin: origin}
	if f, known, found := j.CRDs.finding(group, version, obj.Kind, base); known {
		if found {
			out = append(out, f)
		}
	} else if e, ok := j.Catalog.LookupKind(group, version, obj.Kind); ok {
		if f, ok := j.apiFinding(e, base); ok {
			out = append(out, f)
		}
	}
	if obj.JSON != nil && j.Fields != nil {
		resource := j.resource(group, version, obj.Kind)
		for _, r := range j.Fields.Match(group, version, resource, "", "create", obj.JSON) {
			f := base
			f.Rule, f.Message, f.DeprecatedIn, f.RemovedIn = report.RuleDeprecatedField, r.Message, r.DeprecatedIn, r.RemovedIn
			f.Source = report.SourceFieldRule
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
	group, version := catalog.SplitAPIVersion(apiVersion)
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

func (j Judge) apiFinding(e catalog.Entry, f report.Finding) (report.Finding, bool) {
	f.Severity = j.severity(e.DeprecatedIn, e.RemovedIn)
	if f.Severity == "" {
		return f, false
	}
	f.Rule = report.RuleDeprecatedAPI
	if f.Severity == catalog.StateRemoved {
		f.Rule = report.RuleRemovedAPI
	}
	f.Source = entrySource(e)
	f.DeprecatedIn, f.RemovedIn, f.Message = e.DeprecatedIn, e.RemovedIn, e.Warning()
	conversions := j.Conversions
	if conversions == nil {
		conversions = convert.New(j.Catalog)
	}
	if c, ok := conversions.Lookup(e.Group, e.Version, e.Kind); ok && c.HasReplacement() {
		f.Replacement = c.To.String()
	}
	if removed := e.Removed(); !removed.IsZero() && !j.Current.IsZero() && !j.Current.Less(removed) {
		f.AlreadyRemoved = true
	}
	return f, true
}

// severity is report.Severity at the judge's target.
func (j Judge) severity(deprecatedIn, removedIn string) string {
	return report.Severity(j.Target, deprecatedIn, removedIn)
}

// entrySource is where a catalog entry comes from: the built-in catalog
// or catalog.extra.
func entrySource(e catalog.Entry) string {
	if e.Extra {
		return report.SourceExtra
	}
	return report.SourceCatalog
}
