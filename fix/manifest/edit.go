package manifest

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// editNode changes n, which reads as old, so that it reads as want, at
// the paths where they differ only: a key the conversion removed is
// removed, one it added is inserted where the first removed one was (so a
// renamed field keeps its place and its comment), a changed value is
// edited in place, and every other key keeps its node, comments and order.
func editNode(n *yaml.Node, old, want any, at string) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return fmt.Errorf("%s uses a YAML anchor or alias, which a rewrite could change", where(at))
	}
	om, oldIsMap := old.(map[string]any)
	wm, wantIsMap := want.(map[string]any)
	if oldIsMap && wantIsMap && n.Kind == yaml.MappingNode {
		return editMapping(n, om, wm, at)
	}
	ol, oldIsList := old.([]any)
	wl, wantIsList := want.([]any)
	if oldIsList && wantIsList && n.Kind == yaml.SequenceNode && len(ol) == len(wl) && len(n.Content) == len(ol) {
		for i := range ol {
			if reflect.DeepEqual(ol[i], wl[i]) {
				continue
			}
			if err := editNode(n.Content[i], ol[i], wl[i], fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		return nil
	}
	replace(n, build(want, n.Style&yaml.FlowStyle != 0))
	return nil
}

func editMapping(n *yaml.Node, old, want map[string]any, at string) error {
	rn := kyaml.NewRNode(n)
	for k := range old {
		if rn.Field(k) == nil {
			// A key from a merge (<<) is in no node of this mapping.
			return fmt.Errorf("%s.%s is not written in this mapping (a YAML merge key?)", where(at), k)
		}
	}
	insertAt, head := -1, ""
	var lineComments []string
	for i := 0; i+1 < len(n.Content); {
		k := n.Content[i].Value
		w, keep := want[k]
		if !keep {
			if insertAt < 0 {
				insertAt, head = i, n.Content[i].HeadComment
			}
			for _, c := range []string{n.Content[i].LineComment, n.Content[i+1].LineComment} {
				if c != "" {
					lineComments = append(lineComments, c)
				}
			}
			if _, err := rn.Pipe(kyaml.Clear(k)); err != nil {
				return err
			}
			continue
		}
		if !reflect.DeepEqual(old[k], w) {
			if err := editNode(n.Content[i+1], old[k], w, at+"."+k); err != nil {
				return err
			}
		}
		i += 2
	}
	var added []string
	for k := range want {
		if _, ok := old[k]; !ok {
			added = append(added, k)
		}
	}
	sort.Strings(added)
	if insertAt < 0 {
		insertAt = len(n.Content)
	}
	flow := n.Style&yaml.FlowStyle != 0
	var nodes []*yaml.Node
	for i, k := range added {
		key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}
		if i == 0 {
			// The comments of the keys removed go with the first key
			// that takes their place.
			key.HeadComment = head
			key.LineComment = strings.Join(lineComments, " ")
		}
		nodes = append(nodes, key, build(want[k], flow))
	}
	n.Content = slices.Insert(n.Content, insertAt, nodes...)
	return nil
}

// replace puts b in n's place, keeping n's comments, and its quoting when
// both are strings.
func replace(n, b *yaml.Node) {
	head, line, foot, style := n.HeadComment, n.LineComment, n.FootComment, n.Style
	wasString := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str"
	*n = *b
	n.HeadComment, n.LineComment, n.FootComment = head, line, foot
	if wasString && b.Kind == yaml.ScalarNode && b.Tag == "!!str" && style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		n.Style = style
	}
}

// build is a node for a value as JSON decodes it: whole numbers as
// integers, keys sorted; flow style inside a flow collection.
func build(v any, flow bool) *yaml.Node {
	var style yaml.Style
	if flow {
		style = yaml.FlowStyle
	}
	switch x := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: style}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, build(x[k], flow))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: style}
		for _, e := range x {
			n.Content = append(n.Content, build(e, flow))
		}
		return n
	case string:
		n := &yaml.Node{}
		n.SetString(x)
		return n
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(int64(x), 10)}
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(x, 'g', -1, 64)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(x)}
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
	// JSON decodes to nothing else.
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: fmt.Sprint(v)}
}

func where(at string) string {
	if at == "" {
		return "the object"
	}
	return at[1:]
}
