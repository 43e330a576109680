package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kube-sunset/sunset/internal/yamldoc"
)

// verify parses a rewritten segment back: its objects must be wants.
func verify(text []byte, wants []map[string]any) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return err
	}
	if len(doc.Content) == 0 {
		return errors.New("no document left")
	}
	objs := objectNodes(doc.Content[0])
	if len(objs) != len(wants) {
		return fmt.Errorf("%d objects instead of %d", len(objs), len(wants))
	}
	for i, o := range objs {
		got, err := decode(o)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, wants[i]) {
			return fmt.Errorf("object %d differs", i+1)
		}
	}
	return nil
}

// objectNodes are the objects of a document: its root, or a List's items.
func objectNodes(root *yaml.Node) []*yaml.Node {
	if root.Kind != yaml.MappingNode {
		return nil
	}
	items := yamldoc.MapValue(root, "items")
	if !strings.HasSuffix(yamldoc.Scalar(yamldoc.MapValue(root, "kind")), "List") || items == nil || items.Kind != yaml.SequenceNode {
		return []*yaml.Node{root}
	}
	var out []*yaml.Node
	for _, it := range items.Content {
		if it.Kind == yaml.MappingNode {
			out = append(out, it)
		}
	}
	return out
}

// decode is the object as JSON reads it, the form convert takes.
func decode(n *yaml.Node) (map[string]any, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	m, err := normalize(v)
	if err != nil {
		return nil, fmt.Errorf("line %d: not an object JSON can hold: %w", n.Line, err)
	}
	return m, nil
}

func normalize(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}
