package manifest

import (
	"bytes"
	"errors"
	"reflect"
	"slices"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kube-sunset/sunset/internal/yamldoc"
)

// splice writes the segment with its text edits, and in each block
// mapping the conversion changed, the keys that changed encoded anew in
// place of their lines; every other line stays.
func (d *document) splice(root *yaml.Node) ([]byte, error) {
	text, err := applyTexts(d.seg.data, d.texts)
	if err != nil {
		return nil, err
	}
	if !d.edited {
		return text, nil
	}
	lines := splitLines(text)
	keys := d.pos[root]
	var out bytes.Buffer
	out.Write(bytes.Join(lines[:keys[0].line-1], nil))
	if err := d.spliceMapping(&out, root, lines, len(lines), d.old, d.want, d.style(d.seg.data)); err != nil {
		return nil, err
	}
	return endLike(out.Bytes(), d.seg.data), nil
}

// spliceMapping writes the mapping n, whose keys were parsed at d.pos[n]
// and whose lines end before line index end, as want; old is what it
// read as.
func (d *document) spliceMapping(out *bytes.Buffer, n *yaml.Node, lines [][]byte, end int, old, want map[string]any, def format) error {
	keys := d.pos[n]
	segs := map[string][][]byte{}
	for i, k := range keys {
		stop := end
		if i+1 < len(keys) {
			stop = keys[i+1].line - 1
		}
		segs[k.name] = lines[k.line-1 : stop]
	}
	col := keys[0].col
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		seg, had := segs[key.Value]
		if had && reflect.DeepEqual(old[key.Value], want[key.Value]) {
			out.Write(bytes.Join(seg, nil))
			continue
		}
		f := def
		if had {
			f = keyFormat(seg, col, def)
		}
		om, oldMap := old[key.Value].(map[string]any)
		wm, wantMap := want[key.Value].(map[string]any)
		if inner, ok := d.pos[value]; ok && had && oldMap && wantMap && inner[0].line > key.Line && inner[0].col > col && inner[0].line-key.Line <= len(seg) {
			// The key's own line, and the comments before its first
			// key, stay; its keys are spliced in turn.
			first := seg[0 : inner[0].line-key.Line]
			out.Write(bytes.Join(first, nil))
			if err := d.spliceMapping(out, value, lines, segEnd(lines, seg), om, wm, f); err != nil {
				return err
			}
			continue
		}
		k := *key
		k.HeadComment = "" // it is in the lines before, kept
		enc, err := f.encode(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{&k, value}})
		if err != nil {
			return err
		}
		out.Write(indentLines(enc, col-1))
		if had {
			out.Write(trailingLines(bytes.Join(seg, nil)))
		}
	}
	return nil
}

// segEnd is the index in lines just past seg, a slice of it.
func segEnd(lines, seg [][]byte) int {
	if len(seg) == 0 {
		return 0
	}
	for i := range lines {
		if &lines[i] == &seg[0] {
			return i + len(seg)
		}
	}
	return len(lines)
}

// indentLines puts n spaces before every line of b that is not empty.
func indentLines(b []byte, n int) []byte {
	if n == 0 {
		return b
	}
	pad := bytes.Repeat([]byte(" "), n)
	var out bytes.Buffer
	for _, l := range splitLines(b) {
		if len(bytes.TrimRight(l, "\r\n")) > 0 {
			out.Write(pad)
		}
		out.Write(l)
	}
	return out.Bytes()
}

// keyFormat is how a key at column col was written: the indentation of
// its value's lines, and whether its sequence's dashes stand at its own
// column (compact) or further in.
func keyFormat(seg [][]byte, col int, def format) format {
	f := def
	for _, l := range seg[1:] {
		t := bytes.TrimLeft(l, " ")
		if len(bytes.TrimSpace(t)) == 0 || t[0] == '#' {
			continue
		}
		ind := len(l) - len(t) - (col - 1)
		switch {
		case t[0] == '-' && ind == 0:
			f.compact = true
		case t[0] == '-' && ind > 0:
			f.compact = false
		case ind >= 2 && ind <= 9:
			f.indent = ind
		}
		break
	}
	return f
}

// encodeWhole writes the segment's lines before the root as they were, and
// the root encoded anew: a List, or a root in flow style.
func (d *document) encodeWhole(root *yaml.Node) ([]byte, error) {
	for _, t := range d.texts {
		t.node.Value = t.value
	}
	lines := splitLines(d.seg.data)
	if root.Line < 1 || root.Line > len(lines) || yamldoc.IsMarker(lines[root.Line-1]) {
		return nil, errors.New("the object starts on the --- line")
	}
	r := *root
	r.HeadComment = ""
	enc, err := d.style(d.seg.data).encode(&r)
	if err != nil {
		return nil, err
	}
	out := slices.Concat(bytes.Join(lines[:root.Line-1], nil), enc, trailingLines(d.seg.data))
	return endLike(out, d.seg.data), nil
}
