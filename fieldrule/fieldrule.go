// Package fieldrule finds requests that set deprecated fields, the other
// kind of deprecation (KEP-4004), such as kubelets still writing
// status.nodeInfo.kubeProxyVersion.
//
// A rule matches a request to its group, version, resource, subresource and
// verbs whose body sets the field to a non-empty value. Only that fact is
// used: neither the value nor the rest of the body is kept. The body is in
// audit events only at Request level or above; at Metadata level no rule
// can match.
package fieldrule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/kube-sunset/sunset/catalog"
)

// Rule describes one deprecated field.
type Rule struct {
	// Name identifies the rule in the API: /fieldrequestcounts/{name}.
	Name        string   `mapstructure:"name" json:"name"`
	Group       string   `mapstructure:"group" json:"group"`
	Version     string   `mapstructure:"version" json:"version"`
	Resource    string   `mapstructure:"resource" json:"resource"`
	Subresource string   `mapstructure:"subresource" json:"subresource,omitempty"`
	Verbs       []string `mapstructure:"verbs" json:"verbs"`
	// Field is a dotted path in the object, e.g. status.nodeInfo.kubeProxyVersion.
	Field        string `mapstructure:"field" json:"field"`
	DeprecatedIn string `mapstructure:"deprecatedIn" json:"deprecatedIn,omitempty"`
	RemovedIn    string `mapstructure:"removedIn" json:"removedIn,omitempty"`
	Message      string `mapstructure:"message" json:"message"`
}

// KubeProxyVersion is the built-in rule: KEP-4004 deprecated the field in
// 1.31, and kubelets stop setting it with the DisableNodeKubeProxyVersion
// feature gate.
var KubeProxyVersion = Rule{
	Name: "kube-proxy-version", Version: "v1", Resource: "nodes", Subresource: "status",
	Verbs: []string{"update", "patch"}, Field: "status.nodeInfo.kubeProxyVersion", DeprecatedIn: "1.31",
	Message: "v1 Node status.nodeInfo.kubeProxyVersion is deprecated in v1.31+ (KEP-4004): kubelets should stop setting it (feature gate DisableNodeKubeProxyVersion)",
}

var nameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Validate checks one rule.
func (r Rule) Validate() error {
	var errs []string
	if !nameRe.MatchString(r.Name) {
		errs = append(errs, fmt.Sprintf("name %q is not a lowercase DNS label", r.Name))
	}
	if r.Version == "" || r.Resource == "" {
		errs = append(errs, "version and resource are required")
	}
	if len(r.Verbs) == 0 {
		errs = append(errs, "verbs are required, e.g. [update, patch]")
	}
	if r.Field == "" || strings.HasPrefix(r.Field, ".") || strings.HasSuffix(r.Field, ".") || strings.Contains(r.Field, "..") {
		errs = append(errs, fmt.Sprintf("field %q is not a dotted path such as status.nodeInfo.kubeProxyVersion", r.Field))
	}
	for key, rel := range map[string]string{"deprecatedIn": r.DeprecatedIn, "removedIn": r.RemovedIn} {
		if rel != "" {
			if _, err := catalog.ParseRelease(rel); err != nil {
				errs = append(errs, key+": "+err.Error())
			}
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return fmt.Errorf("field rule %q: %s", r.Name, strings.Join(errs, "; "))
	}
	return nil
}

// Set is the rules in force: the built-in ones and configured ones.
type Set struct {
	rules []Rule
}

// New builds a Set of the built-in rules plus extra; a configured rule with
// a built-in's name replaces it.
func New(extra []Rule) (*Set, error) {
	s := &Set{rules: []Rule{KubeProxyVersion}}
	var errs []error
	seen := map[string]bool{}
	for i, r := range extra {
		if err := r.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("field-rules[%d]: %w", i, err))
			continue
		}
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("field-rules[%d]: name %q is used twice", i, r.Name))
			continue
		}
		seen[r.Name] = true
		r.DeprecatedIn, r.RemovedIn = catalog.NormalizeRelease(r.DeprecatedIn), catalog.NormalizeRelease(r.RemovedIn)
		s.rules = slices.DeleteFunc(s.rules, func(b Rule) bool { return b.Name == r.Name })
		s.rules = append(s.rules, r)
	}
	return s, errors.Join(errs...)
}

// Rules returns the rules in force.
func (s *Set) Rules() []Rule { return slices.Clone(s.rules) }

// Rule returns one rule by name.
func (s *Set) Rule(name string) (Rule, bool) {
	i := slices.IndexFunc(s.rules, func(r Rule) bool { return r.Name == name })
	if i < 0 {
		return Rule{}, false
	}
	return s.rules[i], true
}

// Selects reports whether some rule looks at requests of this group,
// version, resource, subresource and verb, whatever their body.
func (s *Set) Selects(group, version, resource, subresource, verb string) bool {
	return slices.ContainsFunc(s.rules, func(r Rule) bool { return r.selects(group, version, resource, subresource, verb) })
}

func (r Rule) selects(group, version, resource, subresource, verb string) bool {
	return r.Group == group && r.Version == version && r.Resource == resource && r.Subresource == subresource &&
		slices.Contains(r.Verbs, verb)
}

// Match returns the rules a request matches.
func (s *Set) Match(group, version, resource, subresource, verb string, body []byte) []Rule {
	if len(body) == 0 {
		return nil
	}
	var out []Rule
	for _, r := range s.rules {
		if r.selects(group, version, resource, subresource, verb) && SetsField(body, strings.Split(r.Field, ".")) {
			out = append(out, r)
		}
	}
	return out
}

// SetsField reports whether a request body sets the field at path to a
// non-empty value. The body is an object (create, update), a merge or
// strategic merge patch (the same shape), or a JSON Patch (a list of
// operations, RFC 6902).
func SetsField(body []byte, path []string) bool {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var ops []struct {
			Op    string          `json:"op"`
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		}
		if json.Unmarshal(body, &ops) != nil {
			return false
		}
		for _, op := range ops {
			if op.Op != "add" && op.Op != "replace" {
				continue
			}
			opPath := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
			for i := range opPath {
				opPath[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(opPath[i])
			}
			// The op writes the field itself or an object above it.
			if len(opPath) <= len(path) && slices.Equal(opPath, path[:len(opPath)]) && nonEmptyAt(op.Value, path[len(opPath):]) {
				return true
			}
		}
		return false
	}
	return nonEmptyAt(body, path)
}

// nonEmptyAt follows path through JSON objects and reports whether the
// value there is set: not null, "", {} or [].
func nonEmptyAt(raw json.RawMessage, path []string) bool {
	for _, key := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return false
		}
		next, ok := obj[key]
		if !ok {
			return false
		}
		raw = next
	}
	switch v := strings.TrimSpace(string(raw)); v {
	case "", "null", `""`, "{}", "[]":
		return false
	}
	return true
}
