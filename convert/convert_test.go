package convert

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/catalog"
)

func builtinTable(t *testing.T) *Table {
	t.Helper()
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	return New(cat)
}

// sameFields are the built-in APIs whose replacement takes the object as
// it is, with the replacement's apiVersion written out.
var sameFields = []struct{ apiVersion, kind, to string }{
	{"admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicy", "admissionregistration.k8s.io/v1"},
	{"admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicyBinding", "admissionregistration.k8s.io/v1"},
	{"apiregistration.k8s.io/v1beta1", "APIService", "apiregistration.k8s.io/v1"},
	{"apps/v1beta1", "ControllerRevision", "apps/v1"},
	{"apps/v1beta2", "ControllerRevision", "apps/v1"},
	{"authentication.k8s.io/v1beta1", "TokenReview", "authentication.k8s.io/v1"},
	{"authorization.k8s.io/v1beta1", "SelfSubjectAccessReview", "authorization.k8s.io/v1"},
	{"authorization.k8s.io/v1beta1", "SelfSubjectRulesReview", "authorization.k8s.io/v1"},
	{"autoscaling/v2beta2", "HorizontalPodAutoscaler", "autoscaling/v2"},
	{"batch/v1beta1", "CronJob", "batch/v1"},
	{"certificates.k8s.io/v1beta1", "ClusterTrustBundle", "certificates.k8s.io/v1"},
	{"coordination.k8s.io/v1beta1", "Lease", "coordination.k8s.io/v1"},
	{"extensions/v1beta1", "NetworkPolicy", "networking.k8s.io/v1"},
	{"flowcontrol.apiserver.k8s.io/v1alpha1", "FlowSchema", "flowcontrol.apiserver.k8s.io/v1"},
	{"flowcontrol.apiserver.k8s.io/v1beta1", "FlowSchema", "flowcontrol.apiserver.k8s.io/v1"},
	{"flowcontrol.apiserver.k8s.io/v1beta2", "FlowSchema", "flowcontrol.apiserver.k8s.io/v1"},
	{"flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", "flowcontrol.apiserver.k8s.io/v1"},
	{"networking.k8s.io/v1beta1", "IngressClass", "networking.k8s.io/v1"},
	{"node.k8s.io/v1beta1", "RuntimeClass", "node.k8s.io/v1"},
	{"rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding", "rbac.authorization.k8s.io/v1"},
	{"rbac.authorization.k8s.io/v1beta1", "ClusterRole", "rbac.authorization.k8s.io/v1"},
	{"rbac.authorization.k8s.io/v1beta1", "RoleBinding", "rbac.authorization.k8s.io/v1"},
	{"rbac.authorization.k8s.io/v1beta1", "Role", "rbac.authorization.k8s.io/v1"},
	{"scheduling.k8s.io/v1beta1", "PriorityClass", "scheduling.k8s.io/v1"},
	{"storage.k8s.io/v1alpha1", "CSIStorageCapacity", "storage.k8s.io/v1"},
	{"storage.k8s.io/v1alpha1", "VolumeAttachment", "storage.k8s.io/v1"},
	{"storage.k8s.io/v1alpha1", "VolumeAttributesClass", "storage.k8s.io/v1"},
	{"storage.k8s.io/v1beta1", "CSIDriver", "storage.k8s.io/v1"},
	{"storage.k8s.io/v1beta1", "CSINode", "storage.k8s.io/v1"},
	{"storage.k8s.io/v1beta1", "CSIStorageCapacity", "storage.k8s.io/v1"},
	{"storage.k8s.io/v1beta1", "StorageClass", "storage.k8s.io/v1"},
	{"storage.k8s.io/v1beta1", "VolumeAttachment", "storage.k8s.io/v1"},
	{"storage.k8s.io/v1beta1", "VolumeAttributesClass", "storage.k8s.io/v1"},
	{"storagemigration.k8s.io/v1beta1", "StorageVersionMigration", "storagemigration.k8s.io/v1"},
}

// noReplacement are the built-in APIs the catalog names no replacement for.
var noReplacement = []struct{ apiVersion, kind string }{
	{"v1", "ComponentStatus"},
	{"admissionregistration.k8s.io/v1alpha1", "MutatingAdmissionPolicy"},
	{"admissionregistration.k8s.io/v1alpha1", "MutatingAdmissionPolicyBinding"},
	{"admissionregistration.k8s.io/v1alpha1", "ValidatingAdmissionPolicy"},
	{"admissionregistration.k8s.io/v1alpha1", "ValidatingAdmissionPolicyBinding"},
	{"admissionregistration.k8s.io/v1beta1", "ValidatingAdmissionPolicy"},
	{"admissionregistration.k8s.io/v1beta1", "ValidatingAdmissionPolicyBinding"},
	{"authentication.k8s.io/v1alpha1", "SelfSubjectReview"},
	{"authentication.k8s.io/v1beta1", "SelfSubjectReview"},
	{"certificates.k8s.io/v1alpha1", "ClusterTrustBundle"},
	{"coordination.k8s.io/v1alpha1", "LeaseCandidate"},
	{"coordination.k8s.io/v1alpha2", "LeaseCandidate"},
	{"coordination.k8s.io/v1beta1", "LeaseCandidate"},
	{"lifecycle.k8s.io/v1alpha1", "EvictionRequest"},
	{"networking.k8s.io/v1alpha1", "ClusterCIDR"},
	{"networking.k8s.io/v1alpha1", "IPAddress"},
	{"networking.k8s.io/v1alpha1", "ServiceCIDR"},
	{"networking.k8s.io/v1beta1", "IPAddress"},
	{"networking.k8s.io/v1beta1", "ServiceCIDR"},
	{"resource.k8s.io/v1alpha3", "DeviceTaintRule"},
	{"resource.k8s.io/v1alpha3", "ResourcePoolStatusRequest"},
	{"resource.k8s.io/v1beta1", "DeviceClass"},
	{"resource.k8s.io/v1beta1", "ResourceClaim"},
	{"resource.k8s.io/v1beta1", "ResourceClaimTemplate"},
	{"resource.k8s.io/v1beta1", "ResourceSlice"},
	{"resource.k8s.io/v1beta2", "DeviceClass"},
	{"resource.k8s.io/v1beta2", "DeviceTaintRule"},
	{"resource.k8s.io/v1beta2", "ResourceClaim"},
	{"resource.k8s.io/v1beta2", "ResourceClaimTemplate"},
	{"resource.k8s.io/v1beta2", "ResourceSlice"},
	{"scheduling.k8s.io/v1beta1", "PodGroup"},
	{"scheduling.k8s.io/v1beta1", "Workload"},
	{"storagemigration.k8s.io/v1alpha1", "StorageVersionMigration"}}

func TestSameFields(t *testing.T) {
	table := builtinTable(t)
	for _, c := range sameFields {
		t.Run(c.apiVersion+" "+c.kind, func(t *testing.T) {
			in := map[string]any{
				"apiVersion": c.apiVersion, "kind": c.kind,
				"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "b"}},
				"spec":     map[string]any{"list": []any{"one", map[string]any{"two": 2.0}}},
			}
			out, err := table.Convert(in)
			require.NoError(t, err)
			require.Equal(t, map[string]any{
				"apiVersion": c.to, "kind": c.kind,
				"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "b"}},
				"spec":     map[string]any{"list": []any{"one", map[string]any{"two": 2.0}}},
			}, out)
			require.Equal(t, c.apiVersion, in["apiVersion"], "the input is left as it was")
		})
	}
}

func TestNoReplacement(t *testing.T) {
	table := builtinTable(t)
	for _, c := range noReplacement {
		t.Run(c.apiVersion+" "+c.kind, func(t *testing.T) {
			_, err := table.Convert(map[string]any{"apiVersion": c.apiVersion, "kind": c.kind})
			var refused *RefusedError
			require.ErrorAs(t, err, &refused)
			require.Equal(t, "the catalog names no replacement API", refused.Reason)
		})
	}
}

type fieldCase struct {
	Name    string         `json:"name"`
	In      map[string]any `json:"in"`
	Out     map[string]any `json:"out"`
	Refused string         `json:"refused"`
}

func readFieldCases(t *testing.T) []fieldCase {
	t.Helper()
	b, err := os.ReadFile("testdata/fields.yaml")
	require.NoError(t, err)
	var cases []fieldCase
	require.NoError(t, yaml.UnmarshalStrict(b, &cases))
	return cases
}

func TestFieldConversions(t *testing.T) {
	table := builtinTable(t)
	for _, c := range readFieldCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			before, err := json.Marshal(c.In)
			require.NoError(t, err)
			out, err := table.Convert(c.In)
			after, _ := json.Marshal(c.In)
			require.JSONEq(t, string(before), string(after), "the input is left as it was")
			if c.Refused != "" {
				var refused *RefusedError
				require.ErrorAs(t, err, &refused)
				require.Equal(t, c.Refused, refused.Reason)
				require.Equal(t, c.In["apiVersion"], refused.From.APIVersion())
				return
			}
			require.NoError(t, err)
			got, err := json.Marshal(out)
			require.NoError(t, err)
			want, err := json.Marshal(c.Out)
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(got))
		})
	}
}

// TestEveryEntryIsCovered checks that the three lists above and the cases
// in testdata/fields.yaml name every built-in catalog entry once, and that
// each list holds the method the table chose.
func TestEveryEntryIsCovered(t *testing.T) {
	table := builtinTable(t)
	seen := map[GVK]string{}
	mark := func(apiVersion, kind, where string) {
		g, v := catalog.SplitAPIVersion(apiVersion)
		k := GVK{g, v, kind}
		if old, ok := seen[k]; ok && old != where {
			t.Errorf("%s is in both %s and %s", k, old, where)
		}
		seen[k] = where
	}
	for _, c := range sameFields {
		mark(c.apiVersion, c.kind, "sameFields")
	}
	for _, c := range noReplacement {
		mark(c.apiVersion, c.kind, "noReplacement")
	}
	for _, c := range readFieldCases(t) {
		mark(c.In["apiVersion"].(string), c.In["kind"].(string), "fields.yaml")
	}
	conversions := table.Conversions()
	require.Len(t, conversions, 96)
	require.Len(t, seen, len(conversions))
	counts := map[Method]int{}
	for _, c := range conversions {
		counts[c.Method]++
		where, ok := seen[c.From]
		require.True(t, ok, "%s has no test", c.From)
		switch c.Method {
		case SameFields:
			require.Equal(t, "sameFields", where, c.From.String())
		case Refused:
			if !c.HasReplacement() && c.Reason == "the catalog names no replacement API" {
				require.Equal(t, "noReplacement", where, c.From.String())
			} else {
				require.Equal(t, "fields.yaml", where, c.From.String())
			}
		case Fields:
			require.Equal(t, "fields.yaml", where, c.From.String())
		}
	}
	require.Equal(t, map[Method]int{SameFields: 34, Fields: 25, Refused: 37}, counts)
}

func TestConfiguredEntriesAreRefused(t *testing.T) {
	cat, err := catalog.New([]catalog.Entry{
		{Group: "example.com", Version: "v1alpha1", Resource: "widgets", Kind: "Widget", DeprecatedIn: "1.30",
			Replacement: &catalog.Ref{Group: "example.com", Version: "v1", Kind: "Widget", Resource: "widgets"}},
		{Group: "batch", Version: "v1beta1", Resource: "cronjobs", Kind: "CronJob", DeprecatedIn: "1.21", RemovedIn: "1.25",
			Replacement: &catalog.Ref{Group: "batch", Version: "v2", Kind: "CronJob", Resource: "cronjobs"}},
	})
	require.NoError(t, err)
	table := New(cat)
	for _, apiVersion := range []string{"example.com/v1alpha1", "batch/v1beta1"} {
		t.Run(apiVersion, func(t *testing.T) {
			kind := map[string]string{"example.com/v1alpha1": "Widget", "batch/v1beta1": "CronJob"}[apiVersion]
			_, err := table.Convert(map[string]any{"apiVersion": apiVersion, "kind": kind})
			var refused *RefusedError
			require.ErrorAs(t, err, &refused, apiVersion)
			require.Equal(t, "the API comes from configuration, whose fields Sunset does not know", refused.Reason)
		})
	}
	c, ok := table.Lookup("batch", "v1beta1", "CronJob")
	require.True(t, ok)
	require.Equal(t, "batch/v2 CronJob", c.To.String())

	_, err = table.Convert(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"})
	require.ErrorIs(t, err, ErrNotDeprecated)
	require.EqualError(t, err, "convert: the API is not in the catalog as deprecated or removed: apps/v1 Deployment")
	_, err = table.Convert(map[string]any{"kind": "Deployment"})
	require.EqualError(t, err, "convert: the object has no apiVersion or kind")
}

// TestEveryTargetIsServed checks that no conversion ends at an API the
// catalog says is removed: a replacement that was itself replaced is
// followed to the end.
func TestEveryTargetIsServed(t *testing.T) {
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	table := New(cat)
	withTarget := 0
	for _, c := range table.Conversions() {
		if !c.HasReplacement() {
			continue
		}
		withTarget++
		e, ok := cat.LookupKind(c.To.Group, c.To.Version, c.To.Kind)
		require.False(t, ok && e.RemovedIn != "", "%s ends at %s, which is removed in %s", c.From, c.To, e.RemovedIn)
	}
	require.Equal(t, 61, withTarget)
}

func TestChainAppliesEveryStep(t *testing.T) {
	table := builtinTable(t)
	c, ok := table.Lookup("flowcontrol.apiserver.k8s.io", "v1beta2", "PriorityLevelConfiguration")
	require.True(t, ok)
	require.Equal(t, Fields, c.Method)
	require.Equal(t, "flowcontrol.apiserver.k8s.io/v1 PriorityLevelConfiguration", c.To.String())
	c, ok = table.Lookup("storage.k8s.io", "v1alpha1", "CSIStorageCapacity")
	require.True(t, ok)
	require.Equal(t, SameFields, c.Method)
	require.Equal(t, "storage.k8s.io/v1 CSIStorageCapacity", c.To.String())
}

func TestChainOfConfiguredEntries(t *testing.T) {
	// A built-in step followed by a configured one refuses with the
	// configured step's reason.
	cat, err := catalog.New([]catalog.Entry{{Group: "flowcontrol.apiserver.k8s.io", Version: "v1beta3", Resource: "flowschemas",
		Kind: "FlowSchema", DeprecatedIn: "1.29", RemovedIn: "1.32",
		Replacement: &catalog.Ref{Group: "flowcontrol.apiserver.k8s.io", Version: "v2", Kind: "FlowSchema", Resource: "flowschemas"}}})
	require.NoError(t, err)
	_, err = New(cat).Convert(map[string]any{"apiVersion": "flowcontrol.apiserver.k8s.io/v1beta2", "kind": "FlowSchema"})
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, "flowcontrol.apiserver.k8s.io/v1beta2 FlowSchema", refused.From.String())
	require.Equal(t, "its replacement flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema is itself replaced by "+
		"flowcontrol.apiserver.k8s.io/v2 FlowSchema, and the API comes from configuration, whose fields Sunset does not know", refused.Reason)
}
