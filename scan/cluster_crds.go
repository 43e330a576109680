package scan

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan/report"
)

// crds reports each CRD that still stores objects at a version that is
// deprecated, no longer served, or that the catalog removes: dropping that
// version needs a storage migration first.
func (c *Cluster) crds(ctx context.Context) report.Result {
	c.progress("customresourcedefinitions", "")
	var res report.Result
	err := listPages(ctx, PageSize, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := c.Dynamic.Resource(crdGVR).List(ctx, o)
		if err != nil {
			return "", err
		}
		for _, crd := range l.Items {
			res.Scanned.CRDs++
			res.Findings = append(res.Findings, c.storedVersions(crd)...)
		}
		return l.GetContinue(), nil
	})
	if err != nil {
		res.NotScanned = append(res.NotScanned, notScanned(resourceName(crdGVR), "", err))
	}
	return res
}

func (c *Cluster) storedVersions(crd unstructured.Unstructured) []report.Finding {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	byName, storage := crdVersionsOf(crd)
	var out []report.Finding
	for _, sv := range stored {
		if sv == storage {
			continue
		}
		v, known := byName[sv]
		f := report.Finding{APIVersion: group + "/" + sv, Kind: kind, Name: crd.GetName(), Rule: report.RuleCRDStoredVersion,
			Origin: report.Origin{Object: "customresourcedefinitions/" + crd.GetName()}}
		why := ""
		switch e, inCatalog := c.Judge.Catalog.Lookup(group, sv, plural); {
		case !known || !v.served:
			f.Severity, f.Source, why = catalog.StateRemoved, report.SourceCRD, "no longer served"
		case inCatalog && c.Judge.severity(e.DeprecatedIn, e.RemovedIn) != "":
			f.Severity, f.DeprecatedIn, f.RemovedIn = c.Judge.severity(e.DeprecatedIn, e.RemovedIn), e.DeprecatedIn, e.RemovedIn
			f.Source = entrySource(e)
			why = "deprecated"
			if e.RemovedIn != "" {
				why += ", removed in v" + e.RemovedIn
			}
		case v.deprecated:
			f.Severity, f.Source, why = catalog.StateDeprecated, report.SourceCRD, "marked deprecated"
		default:
			continue
		}
		f.Replacement = group + "/" + storage + " " + kind
		f.Message = fmt.Sprintf("%s still lists %s in status.storedVersions (%s): objects may still be stored at it. "+
			"Rewrite every %s at the storage version %s (a StorageVersionMigration, or `kubectl get %s.%s -A -o json | kubectl replace -f -`), "+
			"then `kubectl patch crd %s --subresource=status --type=merge -p '{\"status\":{\"storedVersions\":[\"%s\"]}}'`, before removing %s from the CRD",
			crd.GetName(), sv, why, kind, storage, plural, group, crd.GetName(), storage, sv)
		out = append(out, f)
	}
	return out
}
