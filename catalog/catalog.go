// Package catalog knows the lifecycle of Kubernetes APIs: when each group,
// version and resource was deprecated and removed, and what replaces it.
//
// The built-in catalog (builtin.yaml) is generated from upstream's
// prerelease-lifecycle tags by hack/lifecyclegen; configuration can add
// entries for CRDs or override built-in ones. The package only answers
// questions; it does not read audit events.
package catalog

import (
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed builtin.yaml
var builtinYAML []byte

// Catalog answers lifecycle questions by group, version and resource. It is
// immutable and safe for concurrent use.
type Catalog struct {
	byGVR map[gvr]Entry
	// byGVK answers for manifests, which name a kind, not a resource.
	byGVK map[gvk]Entry
}

type (
	gvr struct{ group, version, resource string }
	gvk struct{ group, version, kind string }
)

// untaggedReplacements are the replacements of built-in APIs that
// upstream's prerelease-lifecycle tags, and so builtin.yaml, do not name,
// though the served API with the same fields exists: node.k8s.io/v1
// RuntimeClass and events.k8s.io/v1 Event have every field of their
// v1beta1, by name and type.
var untaggedReplacements = map[gvk]Ref{
	{"node.k8s.io", "v1beta1", "RuntimeClass"}: {Group: "node.k8s.io", Version: "v1", Kind: "RuntimeClass", Resource: "runtimeclasses"},
	{"events.k8s.io", "v1beta1", "Event"}:      {Group: "events.k8s.io", Version: "v1", Kind: "Event", Resource: "events"},
}

// Builtin returns the entries compiled into Sunset.
func Builtin() ([]Entry, error) {
	f, err := builtinFile()
	if err != nil {
		return nil, err
	}
	for i, e := range f.APIs {
		if r, ok := untaggedReplacements[gvk{e.Group, e.Version, e.Kind}]; ok && e.Replacement == nil {
			f.APIs[i].Replacement = &r
		}
	}
	return f.APIs, nil
}

func builtinFile() (File, error) {
	var f File
	if err := yaml.UnmarshalStrict(builtinYAML, &f); err != nil {
		return File{}, fmt.Errorf("catalog: reading builtin.yaml: %w", err)
	}
	return f, nil
}

// New builds the built-in catalog with extra entries added; an extra entry
// for a group, version and resource the built-in catalog has replaces it.
// Every extra entry is validated, and all problems are returned together.
func New(extra []Entry) (*Catalog, error) {
	builtin, err := Builtin()
	if err != nil {
		return nil, err
	}
	c := &Catalog{byGVR: make(map[gvr]Entry, len(builtin)+len(extra))}
	for _, e := range builtin {
		c.byGVR[gvr{e.Group, e.Version, e.Resource}] = e
	}
	var errs []error
	for i, e := range extra {
		if err := e.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("catalog.extra[%d]: %w", i, err))
			continue
		}
		if e.Source == "" {
			e.Source = "config"
		}
		e.Extra = true
		// Releases are compared and printed ("deprecated in v1.20+") in one
		// spelling, whichever the configuration used.
		e.DeprecatedIn, e.RemovedIn = NormalizeRelease(e.DeprecatedIn), NormalizeRelease(e.RemovedIn)
		c.byGVR[gvr{e.Group, e.Version, e.Resource}] = e
	}
	c.byGVK = make(map[gvk]Entry, len(c.byGVR))
	for _, e := range c.byGVR {
		k := gvk{e.Group, e.Version, e.Kind}
		// Two resources of one kind in one version would make the answer
		// depend on map order; the alphabetically first resource wins.
		if old, ok := c.byGVK[k]; !ok || e.Resource < old.Resource {
			c.byGVK[k] = e
		}
	}
	return c, errors.Join(errs...)
}

// Lookup returns the lifecycle of an API, if the catalog has it. The core
// group is "".
func (c *Catalog) Lookup(group, version, resource string) (Entry, bool) {
	e, ok := c.byGVR[gvr{group, version, resource}]
	return e, ok
}

// LookupKind returns the lifecycle of an API by the kind a manifest names
// (apiVersion and kind), if the catalog has it.
func (c *Catalog) LookupKind(group, version, kind string) (Entry, bool) {
	e, ok := c.byGVK[gvk{group, version, kind}]
	return e, ok
}

// Entries returns every entry, in no particular order.
func (c *Catalog) Entries() []Entry {
	out := make([]Entry, 0, len(c.byGVR))
	for _, e := range c.byGVR {
		out = append(out, e)
	}
	return out
}

var (
	dnsLabelsRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	versionRe   = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
)

// Validate checks one entry: names well formed, releases parsable, and
// deprecated no later than removed.
func (e Entry) Validate() error {
	var errs []string
	if e.Group != "" && !dnsLabelsRe.MatchString(e.Group) {
		errs = append(errs, fmt.Sprintf("group %q is not a DNS name (the core group is empty)", e.Group))
	}
	if !versionRe.MatchString(e.Version) {
		errs = append(errs, fmt.Sprintf("version %q is not a Kubernetes API version such as v1beta1", e.Version))
	}
	if !dnsLabelsRe.MatchString(e.Resource) || strings.Contains(e.Resource, ".") {
		errs = append(errs, fmt.Sprintf("resource %q is not a lowercase plural resource name such as certificates", e.Resource))
	}
	if e.Kind == "" {
		errs = append(errs, "kind is required, e.g. Certificate")
	}
	var dep, rem Release
	var err error
	if e.DeprecatedIn == "" && e.RemovedIn == "" {
		errs = append(errs, "deprecatedIn or removedIn is required")
	}
	if e.DeprecatedIn != "" {
		if dep, err = ParseRelease(e.DeprecatedIn); err != nil {
			errs = append(errs, "deprecatedIn: "+err.Error())
		}
	}
	if e.RemovedIn != "" {
		if rem, err = ParseRelease(e.RemovedIn); err != nil {
			errs = append(errs, "removedIn: "+err.Error())
		}
	}
	if !dep.IsZero() && !rem.IsZero() && rem.Less(dep) {
		errs = append(errs, fmt.Sprintf("removedIn %s is before deprecatedIn %s", rem, dep))
	}
	if r := e.Replacement; r != nil && (r.Version == "" || r.Kind == "") {
		errs = append(errs, "replacement needs at least version and kind")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s/%s %s: %s", e.Group, e.Version, e.Resource, strings.Join(errs, "; "))
	}
	return nil
}

// GroupVersion is "group/version", or "version" for the core group, as
// kubectl and kube-apiserver write it.
func GroupVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

// SplitAPIVersion is GroupVersion's inverse: "apps/v1" is ("apps", "v1"),
// and "v1", the core group's, is ("", "v1").
func SplitAPIVersion(apiVersion string) (group, version string) {
	if g, v, ok := strings.Cut(apiVersion, "/"); ok {
		return g, v
	}
	return "", apiVersion
}

// Warning is the text kube-apiserver sends in its Warning header for a
// request to this API, e.g. "batch/v1beta1 CronJob is deprecated in v1.21+,
// unavailable in v1.25+; use batch/v1 CronJob".
func (e Entry) Warning() string {
	var b strings.Builder
	b.WriteString(GroupVersion(e.Group, e.Version) + " " + e.Kind + " is deprecated")
	if e.DeprecatedIn != "" {
		b.WriteString(" in v" + e.DeprecatedIn + "+")
	}
	if e.RemovedIn != "" {
		b.WriteString(", unavailable in v" + e.RemovedIn + "+")
	}
	if r := e.Replacement; r != nil {
		b.WriteString("; use " + GroupVersion(r.Group, r.Version) + " " + r.Kind)
	}
	return b.String()
}
