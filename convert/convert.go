// Package convert rewrites a Kubernetes object from a deprecated or removed
// API to its replacement, and refuses wherever the rewrite would not be
// lossless. One table, derived from the catalog, holds a Conversion for
// every catalog entry: either only apiVersion changes ("same fields"), or a
// named field conversion, or a refusal with the reason a person has to
// decide. The table's target is the catalog's replacement, followed while
// that is itself replaced, and the scan names it as the replacement, so
// what a scan names and what a fix writes never disagree.
//
// The facts behind each named conversion and refusal are the upstream
// Kubernetes deprecated API migration guide's; the same-fields entries are
// checked against the Go types of k8s.io/api where both versions still
// exist. Objects are unstructured (map[string]any, as sigs.k8s.io/yaml and
// encoding/json decode them); the package reads and writes no files and
// talks to no cluster.
package convert

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kube-sunset/sunset/catalog"
)

// GVK names an API kind by group, version and kind; the core group is "".
type GVK struct {
	Group, Version, Kind string
}

// APIVersion is "group/version", or "version" for the core group.
func (g GVK) APIVersion() string { return catalog.GroupVersion(g.Group, g.Version) }

// String is "apiVersion Kind", the way the scan names a replacement.
func (g GVK) String() string { return g.APIVersion() + " " + g.Kind }

// Method says how an object is moved to its replacement.
type Method string

// Methods of a Conversion.
const (
	// SameFields means only apiVersion (and kind) change.
	SameFields Method = "same-fields"
	// Fields means named fields move, are renamed or get the value the
	// old API defaulted, so that the object means the same.
	Fields Method = "fields"
	// Refused means no rewrite keeps the object's meaning; Reason says
	// what a person has to decide.
	Refused Method = "refused"
)

// Conversion is how one deprecated API is moved to its replacement.
type Conversion struct {
	From GVK
	// To is the replacement; zero when there is none.
	To     GVK
	Method Method
	// Reason says which fields change (Fields) or why the object cannot
	// be converted (Refused); empty for SameFields.
	Reason string
	// apply rewrites the fields of a copy of the object; nil for
	// SameFields and Refused. It returns a *RefusedError when this object
	// cannot be converted without loss.
	apply func(obj map[string]any, o options) error
}

// HasReplacement reports whether the conversion names an API to move to.
func (c Conversion) HasReplacement() bool { return c.To != GVK{} }

// RefusedError says why an object was not converted.
type RefusedError struct {
	From   GVK
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("convert: %s not converted: %s", e.From, e.Reason)
}

// ErrNotDeprecated is returned for an object whose API the table has no
// conversion for: it is not deprecated, or the catalog does not know it.
var ErrNotDeprecated = errors.New("convert: the API is not in the catalog as deprecated or removed")

// Table holds a Conversion for every entry of a catalog. It is immutable
// and safe for concurrent use.
type Table struct {
	byFrom map[GVK]Conversion
}

// New builds the table for cat's entries. Built-in entries get the named
// conversion or refusal the migration guide calls for, else same fields;
// an entry added by configuration (catalog.extra) with a replacement gets
// a refusal, since nothing is known about its fields.
func New(cat *catalog.Catalog) *Table {
	t := &Table{byFrom: map[GVK]Conversion{}}
	// Builtin cannot fail once cat was built from it.
	builtin, _ := catalog.Builtin()
	for _, e := range cat.Entries() {
		from := GVK{e.Group, e.Version, e.Kind}
		c := Conversion{From: from}
		if r := e.Replacement; r != nil {
			c.To = GVK{r.Group, r.Version, r.Kind}
		}
		switch rule, ok := rules[from]; {
		case !c.HasReplacement():
			c.Method, c.Reason = Refused, "the catalog names no replacement API"
			if ok && rule.Method == Refused {
				c.Reason = rule.Reason
			}
		case !slices.ContainsFunc(builtin, func(b catalog.Entry) bool { return sameEntry(b, e) }):
			c.Method, c.Reason = Refused, "the API comes from configuration, whose fields Sunset does not know"
		case ok && rule.Method == Refused:
			c.Method, c.Reason = Refused, rule.Reason
		case ok && rule.To == c.To:
			c.Method, c.Reason, c.apply = rule.Method, rule.Reason, rule.apply
		default:
			c.Method = SameFields
		}
		t.byFrom[from] = c
	}
	// A replacement can itself be deprecated and removed later (flowcontrol
	// v1beta3, storage v1beta1 CSIStorageCapacity); a rewrite stopping
	// there would only move the object to another API that is gone.
	chained := make(map[GVK]Conversion, len(t.byFrom))
	for from, c := range t.byFrom {
		c = t.chain(c)
		if e, ok := cat.LookupKind(c.To.Group, c.To.Version, c.To.Kind); ok && c.HasReplacement() && e.RemovedIn != "" && e.Replacement == nil {
			// The end of the chain is removed too, with nothing after it:
			// no served API takes the object.
			if c.Method != Refused {
				c.Reason = fmt.Sprintf("its replacement %s is removed in %s too, and the catalog names nothing after it", c.To, e.RemovedIn)
			}
			c.To, c.Method, c.apply = GVK{}, Refused, nil
		}
		chained[from] = c
	}
	t.byFrom = chained
	return t
}

// chain follows c's replacement while it is itself an entry of the table
// with a replacement, and returns one conversion from c.From to the last
// API of the chain that applies every step's field conversion in order. A
// step that refuses makes the whole chain refuse with its reason; a cycle,
// which only configuration can make, is refused too.
func (t *Table) chain(c Conversion) Conversion {
	if c.Method == Refused {
		return c
	}
	steps := []Conversion{c}
	seen := map[GVK]bool{c.From: true}
	for {
		last := steps[len(steps)-1]
		next, ok := t.byFrom[last.To]
		if !ok || !next.HasReplacement() {
			break
		}
		if seen[next.From] {
			return Conversion{From: c.From, To: c.To, Method: Refused,
				Reason: fmt.Sprintf("the replacements of %s lead back to %s; the catalog's entries form a cycle", c.From, next.From)}
		}
		seen[next.From] = true
		if next.Method == Refused {
			return Conversion{From: c.From, To: next.To, Method: Refused,
				Reason: fmt.Sprintf("its replacement %s is itself replaced by %s, and %s", next.From, next.To, next.Reason)}
		}
		steps = append(steps, next)
	}
	if len(steps) == 1 {
		return c
	}
	out := Conversion{From: c.From, To: steps[len(steps)-1].To, Method: SameFields}
	var reasons []string
	var applies []func(map[string]any, options) error
	for _, s := range steps {
		if s.Method == Fields {
			out.Method = Fields
			reasons = append(reasons, "to "+s.To.String()+": "+s.Reason)
		}
		if s.apply != nil {
			applies = append(applies, s.apply)
		}
	}
	if out.Method == Fields {
		out.Reason = strings.Join(reasons, "; then, ")
		out.apply = func(obj map[string]any, o options) error {
			for _, apply := range applies {
				if err := apply(obj, o); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return out
}

// sameEntry reports whether e is the built-in entry b, not one that
// configuration added or changed.
func sameEntry(b, e catalog.Entry) bool {
	return b.Group == e.Group && b.Version == e.Version && b.Kind == e.Kind && b.Source == e.Source &&
		(b.Replacement == nil) == (e.Replacement == nil) && (b.Replacement == nil || *b.Replacement == *e.Replacement)
}

// Lookup returns the conversion for an API by apiVersion's group and
// version and kind.
func (t *Table) Lookup(group, version, kind string) (Conversion, bool) {
	c, ok := t.byFrom[GVK{group, version, kind}]
	return c, ok
}

// Conversions returns every conversion, ordered by From.
func (t *Table) Conversions() []Conversion {
	keys := slices.SortedFunc(maps.Keys(t.byFrom), func(a, b GVK) int {
		return cmpStrings(a.Group, b.Group, a.Version, b.Version, a.Kind, b.Kind)
	})
	out := make([]Conversion, 0, len(keys))
	for _, k := range keys {
		out = append(out, t.byFrom[k])
	}
	return out
}

func cmpStrings(pairs ...string) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		switch {
		case pairs[i] < pairs[i+1]:
			return -1
		case pairs[i] > pairs[i+1]:
			return 1
		}
	}
	return 0
}

// An Option changes what Convert writes.
type Option func(*options)

type options struct {
	omitOldDefaults bool
}

// OmitOldDefaults leaves out the old API's defaults that Convert otherwise
// writes where the object leaves a field unset (a Deployment's
// revisionHistoryLimit, a DaemonSet's updateStrategy, a webhook's
// failurePolicy...): only what the replacement requires is written, the
// apiVersion, the fields it requires and the renamed ones. It is for a
// record of an object the apiserver stored through the old API, which
// holds those defaults already: written into the record, a later
// three-way merge from a manifest without them would delete them from the
// object, which then gets the replacement's defaults. A manifest applied
// afresh needs them written, else it gets the replacement's defaults.
func OmitOldDefaults() Option { return func(o *options) { o.omitOldDefaults = true } }

// Convert returns obj moved to its replacement API, as a new object; obj
// is not changed. It returns ErrNotDeprecated for an API the table does
// not have, and a *RefusedError when this object cannot be moved without
// changing what it means.
func (t *Table) Convert(obj map[string]any, opts ...Option) (map[string]any, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil, errors.New("convert: the object has no apiVersion or kind")
	}
	group, version := catalog.SplitAPIVersion(apiVersion)
	c, ok := t.Lookup(group, version, kind)
	if !ok {
		return nil, fmt.Errorf("%w: %s %s", ErrNotDeprecated, apiVersion, kind)
	}
	if c.Method == Refused {
		return nil, &RefusedError{From: c.From, Reason: c.Reason}
	}
	out := deepCopy(obj)
	if c.apply != nil {
		if err := c.apply(out, o); err != nil {
			var refused *RefusedError
			if errors.As(err, &refused) {
				refused.From = c.From
			}
			return nil, err
		}
	}
	out["apiVersion"], out["kind"] = c.To.APIVersion(), c.To.Kind
	return out, nil
}

// deepCopy copies the maps and slices of a decoded object; scalars are
// immutable and shared.
func deepCopy[T any](v T) T {
	var out any
	switch x := any(v).(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		out = m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		out = s
	default:
		return v
	}
	return out.(T)
}
