package scan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kube-sunset/sunset/catalog"
)

// Capabilities is what a chart sees of the cluster it renders for, as
// .Capabilities.KubeVersion and .Capabilities.APIVersions.
type Capabilities struct {
	// KubeVersion is a release such as "1.37".
	KubeVersion string
	// APIVersions holds "group/version" and "group/version/Kind" for every
	// API served, as Helm fills it from a cluster's discovery.
	APIVersions []string
}

// gaAPIs are built-in APIs that client-go's scheme does not hold, served
// by kube-apiserver's extension and aggregation servers, with the release
// each came in (their v1beta1 entries in the catalog are replaced by them).
var gaAPIs = []catalog.Entry{
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", IntroducedIn: "1.16"},
	{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService", IntroducedIn: "1.10"},
}

// ServedAPIVersions returns what a cluster at target serves of the
// built-in APIs, as Helm's .Capabilities.APIVersions spells it, sorted.
//
// The catalog holds introduction and removal releases only for APIs that
// are deprecated, so the list is derived: every group, version and kind in
// client-go's scheme (what Sunset's client-go knows, alpha APIs included),
// plus gaAPIs and every catalog entry; then each catalog entry that target
// does not serve (introduced after it, or removed by it) is taken out,
// and so is a whole group/version whose catalog entries target serves
// none of (policy/v1beta1 goes with PodSecurityPolicy and
// PodDisruptionBudget, its Eviction too). A GA version newer than target
// that the catalog has no entry for (flowcontrol.apiserver.k8s.io/v1 at
// 1.25) stays in: the catalog does not know when it came.
func ServedAPIVersions(cat *catalog.Catalog, target catalog.Release) []string {
	kinds := map[schema.GroupVersionKind]bool{}
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		// Options and list types are registered in every group version;
		// discovery names only the kinds of resources.
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") || !strings.HasPrefix(t.PkgPath(), "k8s.io/api/") {
			continue
		}
		kinds[gvk] = true
	}
	for _, e := range gaAPIs {
		kinds[schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}] = servedAt(e, target)
	}
	// served counts, per group/version in the catalog, its entries target
	// serves.
	served := map[schema.GroupVersion]int{}
	for _, e := range cat.Entries() {
		gvk := schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}
		ok := servedAt(e, target)
		kinds[gvk] = ok
		if ok {
			served[gvk.GroupVersion()]++
		} else if _, seen := served[gvk.GroupVersion()]; !seen {
			served[gvk.GroupVersion()] = 0
		}
	}
	set := map[string]bool{}
	for gvk, ok := range kinds {
		gv := gvk.GroupVersion()
		if n, inCatalog := served[gv]; !ok || inCatalog && n == 0 {
			continue
		}
		set[gv.String()] = true
		set[gv.String()+"/"+gvk.Kind] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// servedAt reports whether target serves the entry's API: introduced by
// then (when the catalog knows) and not removed.
func servedAt(e catalog.Entry, target catalog.Release) bool {
	if r, err := catalog.ParseRelease(e.IntroducedIn); err == nil && target.Less(r) {
		return false
	}
	if r, err := catalog.ParseRelease(e.RemovedIn); err == nil && !target.Less(r) {
		return false
	}
	return true
}

// DiscoverAPIVersions returns the group/versions and group/version/kinds a
// cluster serves outside the built-in groups: its CRDs' and aggregated
// APIs'. The built-in ones are left to ServedAPIVersions, since the
// cluster serves them at its current release, not at the target's.
func DiscoverAPIVersions(cfg *rest.Config, cat *catalog.Catalog) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovering the cluster's APIs: %w", err)
	}
	// A group whose discovery fails (an aggregated API that is down) is
	// reported in err alongside what the rest answered; the scan renders
	// with the rest rather than not at all.
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovering the cluster's APIs: %w", err)
	}
	builtin := builtinGroups(cat)
	set := map[string]bool{}
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil || builtin[gv.Group] {
			continue
		}
		set[gv.String()] = true
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				set[gv.String()+"/"+r.Kind] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set)), nil
}

// builtinGroups are the groups of client-go's scheme, gaAPIs and the
// built-in catalog.
func builtinGroups(cat *catalog.Catalog) map[string]bool {
	groups := map[string]bool{}
	for _, gv := range scheme.Scheme.PrioritizedVersionsAllGroups() {
		groups[gv.Group] = true
	}
	for _, e := range gaAPIs {
		groups[e.Group] = true
	}
	for _, e := range cat.Entries() {
		if e.Source != "config" {
			groups[e.Group] = true
		}
	}
	return groups
}
