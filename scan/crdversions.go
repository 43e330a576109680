package scan

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan/report"
)

// CRDVersions are the versions a cluster's CustomResourceDefinitions
// declare, by group, version and kind: whether each is served, marked
// deprecated, and with what warning. With them, a manifest of a
// third-party API is judged by the cluster's own CRD, not only by
// catalog.extra. The zero value knows no CRD.
type CRDVersions struct {
	byGVK map[gvk]crdVersion
}

type gvk struct{ group, version, kind string }

type crdVersion struct {
	crd                string
	served, deprecated bool
	warning            string
	// storage is the CRD's storage version, to move to.
	storage string
}

// NewCRDVersions reads CustomResourceDefinitions (apiextensions.k8s.io/v1,
// as a dynamic client lists them).
func NewCRDVersions(crds []unstructured.Unstructured) *CRDVersions {
	c := &CRDVersions{byGVK: map[gvk]crdVersion{}}
	for _, crd := range crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		byName, _ := crdVersionsOf(crd)
		for name, v := range byName {
			c.byGVK[gvk{group, name, kind}] = v
		}
	}
	return c
}

// crdVersionsOf reads a CRD's spec.versions: each version by name, every
// one holding the storage version, which it also returns.
func crdVersionsOf(crd unstructured.Unstructured) (map[string]crdVersion, string) {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	storage := ""
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok {
			if s, _ := m["storage"].(bool); s {
				storage, _ = m["name"].(string)
			}
		}
	}
	byName := map[string]crdVersion{}
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		served, _ := m["served"].(bool)
		deprecated, _ := m["deprecated"].(bool)
		warning, _ := m["deprecationWarning"].(string)
		byName[name] = crdVersion{crd: crd.GetName(), served: served, deprecated: deprecated, warning: warning, storage: storage}
	}
	return byName, storage
}

// ReadCRDVersions lists the cluster's CustomResourceDefinitions.
func ReadCRDVersions(ctx context.Context, dyn dynamic.Interface) (*CRDVersions, error) {
	var crds []unstructured.Unstructured
	err := listPages(ctx, PageSize, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := dyn.Resource(crdGVR).List(ctx, o)
		if err != nil {
			return "", err
		}
		crds = append(crds, l.Items...)
		return l.GetContinue(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the cluster's CustomResourceDefinitions: %w", err)
	}
	return NewCRDVersions(crds), nil
}

// finding judges an object by its CRD's version; ok is false when no CRD
// declares the object's group, version and kind, or the version is served
// and not deprecated.
func (c *CRDVersions) finding(group, version, kind string, f report.Finding) (report.Finding, bool, bool) {
	if c == nil {
		return f, false, false
	}
	v, known := c.byGVK[gvk{group, version, kind}]
	if !known {
		return f, false, false
	}
	f.Source = report.SourceCRD
	gv := catalog.GroupVersion(group, version)
	switch {
	case !v.served:
		f.Severity, f.Rule = catalog.StateRemoved, report.RuleRemovedAPI
		f.Message = fmt.Sprintf("%s %s is not served by the cluster's CustomResourceDefinition %s", gv, kind, v.crd)
	case v.deprecated:
		f.Severity, f.Rule = catalog.StateDeprecated, report.RuleDeprecatedAPI
		// kube-apiserver's own warning when the CRD sets none.
		f.Message = v.warning
		if f.Message == "" {
			f.Message = gv + " " + kind + " is deprecated"
		}
	default:
		return f, true, false
	}
	if v.storage != "" && v.storage != version {
		f.Replacement = catalog.GroupVersion(group, v.storage) + " " + kind
	}
	return f, true, true
}
