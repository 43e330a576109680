package manifest

import (
	"bytes"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// format is how the segment is written: its indentation, sequence style
// and line ends.
type format struct {
	indent  int
	compact bool
	crlf    bool
}

func (d *document) style(data []byte) format {
	text := string(data)
	f := format{indent: 2, crlf: strings.Contains(text, "\r\n")}
	f.compact = kyaml.DeriveSeqIndentStyle(text) == string(kyaml.CompactSequenceStyle)
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i, l := range lines {
		if l == "" || l[0] == ' ' || l[0] == '#' || l[0] == '-' || !strings.HasSuffix(strings.TrimSpace(stripComment(l)), ":") {
			continue
		}
		// A top-level key whose value is on the lines below: the first of
		// them that is a key says the indentation.
		for _, next := range lines[i+1:] {
			t := strings.TrimLeft(next, " ")
			if t == "" || t[0] == '#' {
				continue
			}
			if n := len(next) - len(t); n >= 2 && n <= 9 && t[0] != '-' {
				f.indent = n
				return f
			}
			break
		}
	}
	return f
}

func stripComment(l string) string {
	if i := strings.Index(l, " #"); i >= 0 {
		return l[:i]
	}
	return l
}

func (f format) encode(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	e := yaml.NewEncoder(&b)
	e.SetIndent(f.indent)
	if f.compact {
		e.CompactSeqIndent()
	}
	if err := e.Encode(n); err != nil {
		return nil, err
	}
	if err := e.Close(); err != nil {
		return nil, err
	}
	out := withoutTrailingLines(b.Bytes())
	if f.crlf {
		out = bytes.ReplaceAll(out, []byte("\n"), []byte("\r\n"))
	}
	return out, nil
}

// splitLines cuts data after each "\n".
func splitLines(data []byte) [][]byte {
	return bytes.SplitAfter(data, []byte("\n"))
}

// isTrailing reports whether a line is blank or a top-level comment: what
// stands between one top-level key and the next, and belongs to neither
// value.
func isTrailing(l []byte) bool {
	t := bytes.TrimSpace(l)
	return len(t) == 0 || t[0] == '#'
}

// trailingLines are the blank and top-level comment lines that end data.
func trailingLines(data []byte) []byte {
	lines := splitLines(data)
	i := len(lines)
	for i > 0 && isTrailing(lines[i-1]) {
		i--
	}
	return bytes.Join(lines[i:], nil)
}

func withoutTrailingLines(data []byte) []byte {
	return data[:len(data)-len(trailingLines(data))]
}

// endLike gives out the end of line orig has at its end, or none.
func endLike(out, orig []byte) []byte {
	if bytes.HasSuffix(orig, []byte("\n")) {
		return out
	}
	out = bytes.TrimSuffix(out, []byte("\n"))
	return bytes.TrimSuffix(out, []byte("\r"))
}
