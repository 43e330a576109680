package helmrelease

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
)

// Change is one object of a release moved to its replacement API.
type Change struct {
	// Template is the chart template the object came from, or the hook's
	// path.
	Template string
	Kind     string
	// Name is the object's metadata.name.
	Name string
	// From and To are the apiVersions before and after.
	From, To string
	// Fields are the fields that changed beyond apiVersion, each as
	// "path added", "path removed" or "path changed", in path order.
	Fields []string
}

func (c Change) String() string {
	s := fmt.Sprintf("%s/%s: %s -> %s", c.Kind, c.Name, c.From, c.To)
	if len(c.Fields) > 0 {
		s += " (fields: " + strings.Join(c.Fields, ", ") + ")"
	}
	return s
}

// Refusal is one object that has to move and cannot: the release is left
// as it is.
type Refusal struct {
	Template, Kind, Name, APIVersion string
	// Why the object has to move: "removed in 1.25", "not served by the
	// cluster".
	Why string
	Err error
}

func (r Refusal) String() string {
	return fmt.Sprintf("%s %s (%s, %s): %v", r.Kind, r.Name, r.APIVersion, r.Why, r.Err)
}

// mustMove says whether an API has to move, and why; "" when it need not.
type mustMove func(group, version, kind string) string

// rewriter converts the objects of a release's manifests that must move.
type rewriter struct {
	table    *convert.Table
	mustMove mustMove
	// served says whether the cluster serves a replacement: an object
	// moved to one it does not serve yet would break the release now.
	served  func(group, version, kind string) bool
	changes []Change
	refused []Refusal
}

// manifest rewrites a release's manifest, Helm's documents each headed
// by "# Source: template", and returns it with every document that did not
// change kept byte for byte.
func (w *rewriter) manifest(m string) string {
	parts := strings.Split("\n"+m, "\n---\n")
	changed := false
	for i, part := range parts {
		header, body, _ := strings.Cut(part, "\n")
		template, ok := strings.CutPrefix(header, "# Source: ")
		if !ok {
			template, header, body = "", "", part
		}
		if out, ok := w.document(template, body); ok {
			if header != "" {
				out = header + "\n" + out
			}
			parts[i], changed = out, true
		}
	}
	if !changed {
		return m
	}
	return strings.TrimPrefix(strings.Join(parts, "\n---\n"), "\n")
}

// document converts one YAML document if its object, or an item of its
// List, must move; ok is false when it is left as it is.
func (w *rewriter) document(template, body string) (string, bool) {
	if strings.TrimSpace(body) == "" {
		return "", false
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(body), &obj); err != nil {
		// Not an object Helm could have applied either; leave it.
		return "", false
	}
	var out map[string]any
	if items, ok := listItems(obj); ok {
		// Helm flattens a List (v1 List, or any *List) and applies its
		// items one by one; the List's own apiVersion is no API anything
		// is stored at, and discovery does not serve it, so only its items
		// are judged.
		var moved []any
		for i, item := range items {
			m, isObject := item.(map[string]any)
			if !isObject {
				continue
			}
			if conv, ok := w.object(template, m); ok {
				if moved == nil {
					moved = slices.Clone(items)
				}
				moved[i] = conv
			}
		}
		if moved == nil {
			return "", false
		}
		out = maps.Clone(obj)
		out["items"] = moved
	} else {
		conv, ok := w.object(template, obj)
		if !ok {
			return "", false
		}
		out = conv
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		apiVersion, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		w.refused = append(w.refused, Refusal{Template: template, Kind: kind, APIVersion: apiVersion, Why: "its objects must move", Err: err})
		return "", false
	}
	// Keep the document's own line ends, so that the next one starts
	// where it did.
	trail := body[len(strings.TrimRight(body, "\n")):]
	return strings.TrimRight(string(b), "\n") + trail, true
}

// listItems returns the items of a List document: a kind ending in List
// with an items list, as Helm's builder flattens it.
func listItems(obj map[string]any) ([]any, bool) {
	kind, _ := obj["kind"].(string)
	items, ok := obj["items"].([]any)
	return items, ok && strings.HasSuffix(kind, "List")
}

// object converts one object if it must move, recording the change or the
// refusal; ok is false when it is left as it is.
func (w *rewriter) object(template string, obj map[string]any) (map[string]any, bool) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil, false
	}
	group, version := catalog.SplitAPIVersion(apiVersion)
	why := w.mustMove(group, version, kind)
	if why == "" {
		return nil, false
	}
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	// The cluster's object was stored through the old API and holds its
	// defaults; in the record, which the next upgrade's three-way merge
	// takes as the original, they would be deleted from it.
	out, err := w.table.Convert(obj, convert.OmitOldDefaults())
	if err != nil {
		if errors.Is(err, convert.ErrNotDeprecated) {
			err = errors.New("the catalog names no replacement for it")
		}
		w.refused = append(w.refused, Refusal{Template: template, Kind: kind, Name: name, APIVersion: apiVersion, Why: why, Err: err})
		return nil, false
	}
	to, _ := out["apiVersion"].(string)
	if g, v := catalog.SplitAPIVersion(to); !w.served(g, v, kind) {
		err := fmt.Errorf("its replacement %s is not served by the cluster yet: upgrade the cluster to a release serving it first", to)
		w.refused = append(w.refused, Refusal{Template: template, Kind: kind, Name: name, APIVersion: apiVersion, Why: why, Err: err})
		return nil, false
	}
	w.changes = append(w.changes, Change{Template: template, Kind: kind, Name: name, From: apiVersion, To: to, Fields: fieldChanges(obj, out)})
	return out, true
}

// fieldChanges names what differs between an object and its conversion,
// apiVersion and kind aside.
func fieldChanges(before, after map[string]any) []string {
	var out []string
	diff("", before, after, &out)
	slices.Sort(out)
	out = slices.DeleteFunc(out, func(s string) bool {
		return strings.HasPrefix(s, "apiVersion ") || strings.HasPrefix(s, "kind ")
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

func diff(at string, a, b any, out *[]string) {
	join := func(k string) string {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		for k, av := range x {
			if bv, ok := y[k]; ok {
				diff(join(k), av, bv, out)
			} else {
				*out = append(*out, join(k)+" removed")
			}
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				*out = append(*out, join(k)+" added")
			}
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			break
		}
		for i := range x {
			diff(fmt.Sprintf("%s[%d]", at, i), x[i], y[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, at+" changed")
	}
}
