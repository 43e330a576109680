package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

func TestBuiltinInvariants(t *testing.T) {
	c, err := New(nil)
	require.NoError(t, err)
	entries := c.Entries()
	require.Len(t, entries, 96)
	// Replacements outside k8s.io/api, which client-go's scheme lacks.
	outsideClientGo := map[schema.GroupVersionKind]bool{
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}: true,
		{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}:             true,
	}
	byKind := map[schema.GroupVersionKind]Entry{}
	for _, e := range entries {
		byKind[schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}] = e
	}
	for _, e := range entries {
		require.NoError(t, e.Validate())
		dep, rem := e.Deprecated(), e.Removed()
		require.False(t, dep.IsZero(), "%s has a deprecated release", e.Warning())
		if !rem.IsZero() {
			require.False(t, rem.Less(dep), "%s: deprecated <= removed", e.Warning())
		}
		r := e.Replacement
		if r == nil {
			continue
		}
		gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		repl, inCatalog := byKind[gvk]
		require.True(t, inCatalog || scheme.Scheme.Recognizes(gvk) || outsideClientGo[gvk], "%s: replacement %v exists", e.Warning(), gvk)
		if inCatalog && !repl.Removed().IsZero() {
			require.False(t, repl.Removed().Less(rem), "%s: its replacement is removed in %s, before it", e.Warning(), repl.RemovedIn)
		}
	}
}

func TestLookupRealCases(t *testing.T) {
	c, err := New(nil)
	require.NoError(t, err)
	tests := []struct {
		group, version, resource string
		deprecated, removed      string
		warning                  string
	}{
		{"extensions", "v1beta1", "ingresses", "1.14", "1.22", "extensions/v1beta1 Ingress is deprecated in v1.14+, unavailable in v1.22+; use networking.k8s.io/v1 Ingress"},
		{"extensions", "v1beta1", "deployments", "1.8", "1.16", "extensions/v1beta1 Deployment is deprecated in v1.8+, unavailable in v1.16+; use apps/v1 Deployment"},
		{"policy", "v1beta1", "podsecuritypolicies", "1.21", "1.25", "policy/v1beta1 PodSecurityPolicy is deprecated in v1.21+, unavailable in v1.25+"},
		{"batch", "v1beta1", "cronjobs", "1.21", "1.25", "batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob"},
		{"flowcontrol.apiserver.k8s.io", "v1beta3", "flowschemas", "1.29", "1.32", "flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema is deprecated in v1.29+, unavailable in v1.32+; use flowcontrol.apiserver.k8s.io/v1 FlowSchema"},
		{"storage.k8s.io", "v1beta1", "volumeattributesclasses", "1.34", "1.37", "storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass"},
		{"networking.k8s.io", "v1beta1", "ingressclasses", "1.19", "1.22", "networking.k8s.io/v1beta1 IngressClass is deprecated in v1.19+, unavailable in v1.22+; use networking.k8s.io/v1 IngressClass"},
		// Core group: the group/version is just "v1".
		{"", "v1", "endpoints", "1.33", "", "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"},
		{"", "v1", "componentstatuses", "1.19", "", "v1 ComponentStatus is deprecated in v1.19+"},
	}
	for _, tc := range tests {
		e, ok := c.Lookup(tc.group, tc.version, tc.resource)
		require.True(t, ok, tc.resource)
		require.Equal(t, tc.deprecated, e.DeprecatedIn, tc.resource)
		require.Equal(t, tc.removed, e.RemovedIn, tc.resource)
		require.Equal(t, tc.warning, e.Warning())
	}
	for _, gvr := range [][3]string{{"apps", "v1", "deployments"}, {"", "v1", "pods"}, {"batch", "v1", "cronjobs"}} {
		_, ok := c.Lookup(gvr[0], gvr[1], gvr[2])
		require.False(t, ok, gvr)
	}
}

func TestExtraEntriesAddCRDsAndOverride(t *testing.T) {
	c, err := New([]Entry{
		{Group: "cert-manager.io", Version: "v1alpha2", Resource: "certificates", Kind: "Certificate", DeprecatedIn: "1.20", RemovedIn: "1.24",
			Replacement: &Ref{Group: "cert-manager.io", Version: "v1", Kind: "Certificate", Resource: "certificates"}},
		{Group: "e2e.example.com", Version: "v1beta1", Resource: "widgets", Kind: "Widget", DeprecatedIn: "1.30"},
		{Group: "batch", Version: "v1beta1", Resource: "cronjobs", Kind: "CronJob", DeprecatedIn: "1.21", RemovedIn: "1.26"},
	})
	require.NoError(t, err)
	e, ok := c.Lookup("cert-manager.io", "v1alpha2", "certificates")
	require.True(t, ok)
	require.Equal(t, "config", e.Source)
	require.Equal(t, "cert-manager.io/v1alpha2 Certificate is deprecated in v1.20+, unavailable in v1.24+; use cert-manager.io/v1 Certificate", e.Warning())
	// A CRD: the warning Kubernetes gives a deprecated CRD version with no
	// custom deprecationWarning names group/version and kind.
	e, _ = c.Lookup("e2e.example.com", "v1beta1", "widgets")
	require.Equal(t, "e2e.example.com/v1beta1 Widget is deprecated in v1.30+", e.Warning())
	e, _ = c.Lookup("batch", "v1beta1", "cronjobs")
	require.Equal(t, "1.26", e.RemovedIn)
}

func TestExtraEntriesAreValidatedTogether(t *testing.T) {
	_, err := New([]Entry{
		{Group: "Cert_Manager", Version: "beta", Resource: "Certificates", DeprecatedIn: "soon"},
		{Group: "x.io", Version: "v1", Resource: "things", Kind: "Thing", DeprecatedIn: "1.30", RemovedIn: "1.29"},
		{Group: "x.io", Version: "v1", Resource: "others", Kind: "Other"},
	})
	require.EqualError(t, err, `catalog.extra[0]: Cert_Manager/beta Certificates: group "Cert_Manager" is not a DNS name (the core group is empty); version "beta" is not a Kubernetes API version such as v1beta1; resource "Certificates" is not a lowercase plural resource name such as certificates; kind is required, e.g. Certificate; deprecatedIn: "soon" is not a Kubernetes release such as 1.37
catalog.extra[1]: x.io/v1 things: removedIn 1.29 is before deprecatedIn 1.30
catalog.extra[2]: x.io/v1 others: deprecatedIn or removedIn is required`)
}

func TestParseRelease(t *testing.T) {
	for in, want := range map[string]Release{"1.37": {1, 37}, "v1.15": {1, 15}, "v1.36.3": {1, 36}, "1.29.4-gke.100": {1, 29}, "v1.9+": {1, 9}} {
		got, err := ParseRelease(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "1", "one.two", "v.3", "0.5"} {
		_, err := ParseRelease(bad)
		require.Error(t, err, bad)
	}
	require.True(t, MustParseRelease("1.9").Less(MustParseRelease("1.10")))
}

// Releases come back in one spelling however the configuration wrote them,
// so the warning never reads "deprecated in vv1.20+".
func TestExtraEntryReleasesAreNormalised(t *testing.T) {
	c, err := New([]Entry{{Group: "cert-manager.io", Version: "v1alpha2", Resource: "certificates", Kind: "Certificate",
		DeprecatedIn: "v1.20", RemovedIn: "v1.24.3"}})
	require.NoError(t, err)
	e, _ := c.Lookup("cert-manager.io", "v1alpha2", "certificates")
	require.Equal(t, "1.20", e.DeprecatedIn)
	require.Equal(t, "1.24", e.RemovedIn)
	require.Equal(t, "cert-manager.io/v1alpha2 Certificate is deprecated in v1.20+, unavailable in v1.24+", e.Warning())
	require.Equal(t, "1.37", NormalizeRelease("v1.37.2"))
	require.Empty(t, NormalizeRelease(""))
	require.Equal(t, "soon", NormalizeRelease("soon"))
}

func TestLookupKindAnswersForManifests(t *testing.T) {
	c, err := New([]Entry{{Group: "example.com", Version: "v1beta1", Resource: "widgets", Kind: "Widget", DeprecatedIn: "1.30"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		group, version, kind string
		wantResource         string
	}{
		{"extensions", "v1beta1", "Ingress", "ingresses"},
		{"batch", "v1beta1", "CronJob", "cronjobs"},
		{"", "v1", "Endpoints", "endpoints"},
		{"example.com", "v1beta1", "Widget", "widgets"},
		{"networking.k8s.io", "v1", "Ingress", ""},
		{"extensions", "v1beta1", "ingresses", ""},
	} {
		e, ok := c.LookupKind(tc.group, tc.version, tc.kind)
		if got := map[bool]string{true: e.Resource}[ok]; got != tc.wantResource {
			t.Errorf("LookupKind(%q, %q, %q) = %q, want %q", tc.group, tc.version, tc.kind, got, tc.wantResource)
		}
	}
}

// The horizon is the newest release the built-in catalog names: 1.43, the
// planned removal of scheduling.k8s.io/v1beta1 (introduced in 1.37,
// deprecated in 1.40).
func TestHorizonIsTheNewestReleaseTheCatalogNames(t *testing.T) {
	h, err := Horizon()
	if err != nil {
		t.Fatal(err)
	}
	if got := h.String(); got != "1.43" {
		t.Errorf("Horizon() = %s, want 1.43", got)
	}
}

// TestUntaggedReplacements checks that the replacements added to
// builtin.yaml's entries are still missing there (else the hand-kept list
// is stale) and that the catalog names them.
func TestUntaggedReplacements(t *testing.T) {
	f, err := builtinFile()
	require.NoError(t, err)
	inYAML := map[gvk]Entry{}
	for _, e := range f.APIs {
		inYAML[gvk{e.Group, e.Version, e.Kind}] = e
	}
	require.Len(t, untaggedReplacements, 2)
	for k := range untaggedReplacements {
		e, ok := inYAML[k]
		require.True(t, ok, "%v is in builtin.yaml", k)
		require.Nil(t, e.Replacement, "%v: builtin.yaml names a replacement now; drop it from untaggedReplacements", k)
	}
	c, err := New(nil)
	require.NoError(t, err)
	e, ok := c.Lookup("events.k8s.io", "v1beta1", "events")
	require.True(t, ok)
	require.Equal(t, "events.k8s.io/v1beta1 Event is deprecated in v1.22+, unavailable in v1.25+; use events.k8s.io/v1 Event", e.Warning())
	e, ok = c.Lookup("node.k8s.io", "v1beta1", "runtimeclasses")
	require.True(t, ok)
	require.Equal(t, "node.k8s.io/v1beta1 RuntimeClass is deprecated in v1.22+, unavailable in v1.25+; use node.k8s.io/v1 RuntimeClass", e.Warning())
}
