// Package yamldoc holds what the scan and the fix both read of YAML: where
// a stream's documents start, a YAML error's lines counted from the start
// of the stream, and a mapping's values. The fix rewrites what the scan
// reports, so both must cut and read a file the same way.
package yamldoc

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// IsMarker reports whether l, a line with or without its line end, is a
// document marker: "---" or "..." followed by a space or its end. YAML
// forbids one inside a scalar, so it is a marker wherever it stands.
func IsMarker(l []byte) bool {
	if !bytes.HasPrefix(l, []byte("---")) && !bytes.HasPrefix(l, []byte("...")) {
		return false
	}
	return len(l) == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\n' || l[3] == '\r'
}

var yamlLine = regexp.MustCompile(`\bline (\d+)\b`)

// ShiftLines makes the line numbers of a YAML error count from the start
// of the stream rather than of the document, which starts by lines later.
func ShiftLines(err error, by int) error {
	if by == 0 || err == nil {
		return err
	}
	msg := yamlLine.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		return "line " + strconv.Itoa(n+by)
	})
	return errors.New(msg)
}

// MapValue is the value of key in a mapping node, or nil.
func MapValue(n *yaml.Node, key string) *yaml.Node {
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

// Scalar is a scalar's value, or "" for anything else.
func Scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
