package scan

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan/report"
)

// automanagedLabel marks the APIServices kube-apiserver keeps for its own
// group versions.
const automanagedLabel = "kube-aggregator.kubernetes.io/automanaged"

// apiServices reports APIService objects, other than kube-apiserver's own,
// for group versions the catalog removes: an extension server or a
// leftover registration that claims a version Kubernetes drops.
func (c *Cluster) apiServices(ctx context.Context) report.Result {
	c.progress("apiservices", "")
	removal := c.groupVersionRemovals()
	var res report.Result
	err := listPages(ctx, PageSize, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := c.Dynamic.Resource(apiServiceGVR).List(ctx, o)
		if err != nil {
			return "", err
		}
		for _, s := range l.Items {
			res.Scanned.APIServices++
			if _, ok := s.GetLabels()[automanagedLabel]; ok {
				// kube-apiserver registers these for the versions it serves
				// and drops them itself on upgrade; whether clients still
				// call those versions is the traffic's question.
				continue
			}
			group, _, _ := unstructured.NestedString(s.Object, "spec", "group")
			version, _, _ := unstructured.NestedString(s.Object, "spec", "version")
			gv := catalog.GroupVersion(group, version)
			e, ok := removal[gv]
			if !ok {
				continue
			}
			severity := c.Judge.severity(e.DeprecatedIn, e.RemovedIn)
			if severity == "" {
				continue
			}
			f := report.Finding{Severity: severity, Rule: report.RuleAPIService, APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService",
				Name: s.GetName(), DeprecatedIn: e.DeprecatedIn, RemovedIn: e.RemovedIn, Source: entrySource(e),
				Origin: report.Origin{Object: "apiservices/" + s.GetName()}}
			f.Message = fmt.Sprintf("APIService %s registers %s, which Kubernetes removes in v%s: delete it, and move its clients to the replacement versions", s.GetName(), gv, e.RemovedIn)
			removed, _ := catalog.ParseRelease(e.RemovedIn)
			f.AlreadyRemoved = !c.Judge.Current.IsZero() && !c.Judge.Current.Less(removed)
			res.Findings = append(res.Findings, f)
		}
		return l.GetContinue(), nil
	})
	if err != nil {
		res.NotScanned = append(res.NotScanned, notScanned(resourceName(apiServiceGVR), "", err))
	}
	return res
}

// groupVersionRemovals is, for each group version every one of whose
// catalog entries is removed, the entry removed last: the group version is
// gone from that release on.
func (c *Cluster) groupVersionRemovals() map[string]catalog.Entry {
	out := map[string]catalog.Entry{}
	kept := map[string]bool{}
	for _, e := range c.Judge.Catalog.Entries() {
		gv := catalog.GroupVersion(e.Group, e.Version)
		if e.Removed().IsZero() {
			kept[gv] = true
			continue
		}
		if old, ok := out[gv]; !ok || old.Removed().Less(e.Removed()) {
			out[gv] = e
		}
	}
	for gv := range kept {
		delete(out, gv)
	}
	return out
}
