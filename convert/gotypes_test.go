package convert

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestSameFieldsMatchTheGoTypes checks the same-fields entries against
// k8s.io/api: where both versions' Go types are still in client-go's
// scheme, their JSON shapes (field names and types, recursively) must be
// the same.
func TestSameFieldsMatchTheGoTypes(t *testing.T) {
	checked := 0
	for _, c := range sameFields {
		from, okFrom := goType(c.apiVersion, c.kind)
		to, okTo := goType(c.to, c.kind)
		if !okFrom || !okTo {
			continue
		}
		checked++
		if a, b := jsonShape(from, 0), jsonShape(to, 0); a != b {
			t.Errorf("%s %s and %s %s differ:\n%s\n%s", c.apiVersion, c.kind, c.to, c.kind, a, b)
		}
	}
	// autoscaling/v2beta2, flowcontrol v1alpha1 and apiregistration.k8s.io are
	// not in the scheme; the migration guide is the word on those.
	require.Equal(t, 31, checked)
}

// TestEventMatchesTheGoTypes checks that events.k8s.io/v1beta1 and v1
// Event have the same JSON shape, so that the Event conversion only has to
// refuse what v1's validation rejects.
func TestEventMatchesTheGoTypes(t *testing.T) {
	from, ok := goType("events.k8s.io/v1beta1", "Event")
	require.True(t, ok)
	to, ok := goType("events.k8s.io/v1", "Event")
	require.True(t, ok)
	require.Equal(t, jsonShape(from, 0), jsonShape(to, 0))
	require.Contains(t, jsonShape(to, 0), "deprecatedSource:{component:string host:string}")
}

func goType(apiVersion, kind string) (reflect.Type, bool) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false
	}
	obj, err := scheme.Scheme.New(gv.WithKind(kind))
	if err != nil {
		return nil, false
	}
	return reflect.TypeOf(obj).Elem(), true
}

// jsonShape describes a type as its JSON encoding sees it. Types outside
// k8s.io/api (ObjectMeta, Quantity, Time, IntOrString) are leaves named by
// their package and name.
func jsonShape(t reflect.Type, depth int) string {
	if depth > 20 {
		return "…"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonShape(t.Elem(), depth+1)
	case reflect.Slice:
		return "[]" + jsonShape(t.Elem(), depth+1)
	case reflect.Map:
		return "map[" + t.Key().Kind().String() + "]" + jsonShape(t.Elem(), depth+1)
	case reflect.Struct:
		if !strings.HasPrefix(t.PkgPath(), "k8s.io/api/") {
			return t.PkgPath() + "." + t.Name()
		}
		var fields []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || f.Type.Name() == "TypeMeta" {
				continue
			}
			fields = append(fields, name+":"+jsonShape(f.Type, depth+1))
		}
		return "{" + strings.Join(fields, " ") + "}"
	}
	return t.Kind().String()
}
