package scan

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// jsonObjects reads a JSON document's object, or a List's items, keeping
// of each only its identity.
func jsonObjects(doc []byte, line int) ([]Object, error) {
	var top struct {
		APIVersion, Kind json.RawMessage
		Metadata         struct{ Name, Namespace json.RawMessage }
		Items            json.RawMessage
	}
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, fmt.Errorf("line %d: %w", line, errNotPlainBlock)
	}
	str := func(m json.RawMessage) string {
		var s string
		_ = json.Unmarshal(m, &s) // not a string: not an object
		return s
	}
	obj := Object{APIVersion: str(top.APIVersion), Kind: str(top.Kind), Name: str(top.Metadata.Name), Namespace: str(top.Metadata.Namespace),
		Line: line + bytes.Count(doc[:len(doc)-len(bytes.TrimLeft(doc, " \t\r\n"))], []byte("\n"))}
	if obj.APIVersion == "" || obj.Kind == "" {
		return nil, nil
	}
	if len(obj.Kind) < 4 || obj.Kind[len(obj.Kind)-4:] != "List" || len(top.Items) == 0 || top.Items[0] != '[' {
		return []Object{obj}, nil
	}
	var out []Object
	dec := json.NewDecoder(bytes.NewReader(top.Items))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	for dec.More() {
		var item json.RawMessage
		if err := dec.Decode(&item); err != nil {
			return out, err
		}
		objs, err := jsonObjects(item, obj.Line)
		if err != nil {
			return out, err
		}
		out = append(out, objs...)
		if len(out) > MaxObjects {
			return out, errTooManyObjects
		}
	}
	return out, nil
}
