package scan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kube-sunset/sunset/internal/yamldoc"
)

// MaxFileSize bounds one manifest file or stream. Kubernetes refuses
// objects over 1.5 MiB, so a bigger file is a stream of many; 64 MiB is far
// beyond any real repository's and keeps a hostile input from taking the
// memory of the machine running the scan.
const MaxFileSize = 64 << 20

// MaxDocumentSize bounds one YAML document (one object, or one List). A
// document is parsed whole into a node tree, which takes up to about 80
// times its bytes, so this, not the size of a file, is what bounds the
// memory of parsing. kube-apiserver refuses a request body over 3 MiB, so
// no object that can be applied is larger; a larger List (a cluster dump)
// can be split into its objects.
const MaxDocumentSize = 3 << 20

// MaxObjects bounds the objects one input (a file, a kustomization, a
// chart, a release) may hold, and so the findings it may add.
const MaxObjects = 50000

var errTooManyObjects = fmt.Errorf("too large: more than %d objects", MaxObjects)

// readObjects reads a stream of YAML documents (JSON is YAML) and returns
// the Kubernetes objects in it: every document with a string apiVersion
// and kind, and every item of a List. Other documents (values files,
// CI configuration) are not objects and are skipped; a document that is
// not YAML at all is an error, with its line. A document over
// MaxDocumentSize is an error before it is parsed.
func (j Judge) readObjects(data []byte) ([]Object, error) {
	var out []Object
	err := eachDocument(data, func(doc []byte, line int) error {
		if len(doc) > MaxDocumentSize {
			return &TooLargeError{What: fmt.Sprintf("the YAML document at line %d", line), Limit: MaxDocumentSize}
		}
		read := j.treeObjects
		if len(doc) > treeDocumentSize {
			read = j.skimObjects
		}
		objs, err := read(doc, line)
		out = append(out, objs...)
		if err != nil {
			return err
		}
		if len(out) > MaxObjects {
			return errTooManyObjects
		}
		return nil
	})
	return out, err
}

// treeObjects reads one document, which starts at line of its stream,
// parsed whole into a node tree.
func (j Judge) treeObjects(doc []byte, line int) ([]Object, error) {
	var out []Object
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("not YAML or JSON: %w", yamldoc.ShiftLines(err, line-1))
		}
		if len(n.Content) == 0 {
			continue
		}
		objs, err := j.objectsIn(n.Content[0])
		for i := range objs {
			objs[i].Line += line - 1
		}
		out = append(out, objs...)
		if err != nil {
			return out, yamldoc.ShiftLines(err, line-1)
		}
		if len(out) > MaxObjects {
			return out, errTooManyObjects
		}
	}
}

// checkDocuments fails on a document of data over MaxDocumentSize.
func checkDocuments(data []byte) error {
	return eachDocument(data, func(doc []byte, line int) error {
		if len(doc) > MaxDocumentSize {
			return &TooLargeError{What: fmt.Sprintf("the YAML document at line %d", line), Limit: MaxDocumentSize}
		}
		return nil
	})
}

// eachDocument cuts a YAML stream into its documents, without parsing
// them, and calls fn with each and the line it starts at. A line that
// starts with "---" or "..." followed by a space or its end is a document
// marker wherever it is, inside a scalar too (YAML forbids it there).
// What comes before the first document's content (comments, directives)
// stays with it.
func eachDocument(data []byte, fn func(doc []byte, line int) error) error {
	start, startLine, line, content := 0, 1, 1, false
	for i := 0; i < len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		next := len(data)
		if end >= 0 {
			next = i + end + 1
		}
		l := data[i:next]
		if yamldoc.IsMarker(l) && content {
			if err := fn(data[start:i], startLine); err != nil {
				return err
			}
			start, startLine, content = i, line, false
		}
		if !content && !yamldoc.IsMarker(l) {
			t := bytes.TrimSpace(l)
			content = len(t) > 0 && t[0] != '#' && t[0] != '%'
		}
		i = next
		line++
	}
	if content {
		return fn(data[start:], startLine)
	}
	return nil
}

// objectsIn returns the object a document's root node is, or the items of
// a List.
func (j Judge) objectsIn(n *yaml.Node) ([]Object, error) {
	obj, ok, err := j.object(n)
	if err != nil || !ok {
		return nil, err
	}
	items := yamldoc.MapValue(n, "items")
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
	apiVersion, kind := yamldoc.Scalar(yamldoc.MapValue(n, "apiVersion")), yamldoc.Scalar(yamldoc.MapValue(n, "kind"))
	if apiVersion == "" || kind == "" {
		return Object{}, false, nil
	}
	obj := Object{APIVersion: apiVersion, Kind: kind, Line: n.Line}
	if meta := yamldoc.MapValue(n, "metadata"); meta != nil {
		obj.Name, obj.Namespace = yamldoc.Scalar(yamldoc.MapValue(meta, "name")), yamldoc.Scalar(yamldoc.MapValue(meta, "namespace"))
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
