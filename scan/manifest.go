package scan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// MaxFileSize bounds one manifest file or stream. Kubernetes refuses
// objects over 1.5 MiB, so a bigger file is a stream of many; 64 MiB is far
// beyond any real repository's and keeps a hostile input from taking the
// memory of the machine running the scan.
const MaxFileSize = 64 << 20

// readObjects reads a stream of YAML documents (JSON is YAML) and returns
// the Kubernetes objects in it: every document with a string apiVersion
// and kind, and every item of a List. Other documents (values files,
// CI configuration) are not objects and are skipped; a document that is
// not YAML at all is an error, with its line.
func (j Judge) readObjects(data []byte) ([]Object, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []Object
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("not YAML or JSON: %w", err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		objs, err := j.objectsIn(doc.Content[0])
		if err != nil {
			return out, err
		}
		out = append(out, objs...)
	}
}

// objectsIn returns the object a document's root node is, or the items of
// a List.
func (j Judge) objectsIn(n *yaml.Node) ([]Object, error) {
	obj, ok, err := j.object(n)
	if err != nil || !ok {
		return nil, err
	}
	items := mapValue(n, "items")
	if !strings.HasSuffix(obj.Kind, "List") || items == nil || items.Kind != yaml.SequenceNode {
		return []Object{obj}, nil
	}
	var out []Object
	for _, item := range items.Content {
		o, ok, err := j.object(item)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// object reads the identity of one object node; ok is false for a node
// that is not a Kubernetes object.
func (j Judge) object(n *yaml.Node) (Object, bool, error) {
	if n.Kind != yaml.MappingNode {
		return Object{}, false, nil
	}
	apiVersion, kind := scalar(mapValue(n, "apiVersion")), scalar(mapValue(n, "kind"))
	if apiVersion == "" || kind == "" {
		return Object{}, false, nil
	}
	obj := Object{APIVersion: apiVersion, Kind: kind, Line: n.Line}
	if meta := mapValue(n, "metadata"); meta != nil {
		obj.Name, obj.Namespace = scalar(mapValue(meta, "name")), scalar(mapValue(meta, "namespace"))
	}
	if j.WantsBody(apiVersion, kind) {
		var v any
		if err := n.Decode(&v); err != nil {
			return obj, false, fmt.Errorf("line %d: %w", n.Line, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return obj, false, fmt.Errorf("line %d: %s %s is not a JSON object: %w", n.Line, apiVersion, kind, err)
		}
		obj.JSON = b
	}
	return obj, true, nil
}

// mapValue is the value of key in a mapping node, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// scalar is a string scalar's value, or "" for anything else.
func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
