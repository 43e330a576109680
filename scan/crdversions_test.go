package scan_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/report"
)

func crd(t *testing.T, group, kind, plural string, versions ...apiextensionsv1.CustomResourceDefinitionVersion) unstructured.Unstructured {
	t.Helper()
	c := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped, Versions: versions,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	require.NoError(t, err)
	return unstructured.Unstructured{Object: m}
}

// TestThirdPartyAPIsAreJudgedByTheClustersCRDs judges manifests of CRD
// kinds by real CustomResourceDefinitions: a version no longer served is
// removed, one marked deprecated is deprecated with the CRD's own
// warning, and the CRD, not catalog.extra, decides when both know it.
func TestThirdPartyAPIsAreJudgedByTheClustersCRDs(t *testing.T) {
	warning := "example.com/v1beta1 Widget is deprecated; use example.com/v1 Widget, which keeps every field"
	crds := scan.NewCRDVersions([]unstructured.Unstructured{
		crd(t, "example.com", "Widget", "widgets",
			apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1alpha1", Served: false},
			apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1beta1", Served: true, Deprecated: true, DeprecationWarning: &warning},
			apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1", Served: true, Storage: true}),
		crd(t, "example.com", "Gadget", "gadgets",
			apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1beta1", Served: true, Storage: true, Deprecated: true},
			apiextensionsv1.CustomResourceDefinitionVersion{Name: "v2", Served: false}),
	})
	cat, err := catalog.New([]catalog.Entry{
		// The CRD serves v1 without deprecation: the cluster is right.
		{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget", DeprecatedIn: "1.30"},
		{Group: "example.com", Version: "v1", Resource: "things", Kind: "Thing", DeprecatedIn: "1.30", RemovedIn: "1.33"},
	})
	require.NoError(t, err)
	origin := report.Origin{Path: "widgets.yaml", Line: 1}
	judge := func(crds *scan.CRDVersions, apiVersion, kind string) []report.Finding {
		j := scan.Judge{Catalog: cat, Target: catalog.MustParseRelease("1.37"), CRDs: crds}
		return j.Judge(scan.Object{APIVersion: apiVersion, Kind: kind, Name: "a"}, origin)
	}
	f := func(severity, rule, apiVersion, kind, replacement, message, source string) []report.Finding {
		return []report.Finding{{Severity: severity, Rule: rule, APIVersion: apiVersion, Kind: kind, Name: "a", Replacement: replacement,
			Message: message, Source: source, Origin: origin}}
	}
	require.Equal(t, f(catalog.StateRemoved, report.RuleRemovedAPI, "example.com/v1alpha1", "Widget", "example.com/v1 Widget",
		"example.com/v1alpha1 Widget is not served by the cluster's CustomResourceDefinition widgets.example.com", report.SourceCRD),
		judge(crds, "example.com/v1alpha1", "Widget"))
	require.Equal(t, f(catalog.StateDeprecated, report.RuleDeprecatedAPI, "example.com/v1beta1", "Widget", "example.com/v1 Widget", warning, report.SourceCRD),
		judge(crds, "example.com/v1beta1", "Widget"))
	require.Empty(t, judge(crds, "example.com/v1", "Widget"))
	require.Equal(t, f(catalog.StateDeprecated, report.RuleDeprecatedAPI, "example.com/v1beta1", "Gadget", "",
		"example.com/v1beta1 Gadget is deprecated", report.SourceCRD), judge(crds, "example.com/v1beta1", "Gadget"))
	require.Equal(t, f(catalog.StateRemoved, report.RuleRemovedAPI, "example.com/v2", "Gadget", "example.com/v1beta1 Gadget",
		"example.com/v2 Gadget is not served by the cluster's CustomResourceDefinition gadgets.example.com", report.SourceCRD),
		judge(crds, "example.com/v2", "Gadget"))

	// No CRD for Thing, and none at all offline: catalog.extra judges.
	thing := []report.Finding{{Severity: catalog.StateRemoved, Rule: report.RuleRemovedAPI, APIVersion: "example.com/v1", Kind: "Thing", Name: "a",
		DeprecatedIn: "1.30", RemovedIn: "1.33", Message: "example.com/v1 Thing is deprecated in v1.30+, unavailable in v1.33+", Source: report.SourceExtra, Origin: origin}}
	require.Equal(t, thing, judge(crds, "example.com/v1", "Thing"))
	require.Equal(t, thing, judge(nil, "example.com/v1", "Thing"))
	widget := judge(nil, "example.com/v1", "Widget")
	require.Len(t, widget, 1)
	require.Equal(t, report.SourceExtra, widget[0].Source)
	require.Equal(t, report.SourceCatalog, judge(nil, "batch/v1beta1", "CronJob")[0].Source)
}
