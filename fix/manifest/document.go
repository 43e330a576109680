package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/internal/yamldoc"
)

// document is the rewrite of one segment.
type document struct {
	seg      segment
	f        Fixer
	json     bool
	patch    bool
	changes  []Change
	problems []problem
	// texts are scalar values replaced in the text; edited says the node
	// tree was changed past them, so changed keys are written anew.
	texts  []textEdit
	edited bool
	// pos are the keys of the root's block mappings, as parsed, before
	// any edit; old and want are the root object before (with its text
	// edits) and after its node edits.
	pos       map[*yaml.Node][]keyPos
	old, want map[string]any
}

// keyPos is where a key of a block mapping was parsed.
type keyPos struct {
	name      string
	line, col int
}

type textEdit struct {
	node  *yaml.Node
	value string
}

func (d *document) problem(n *yaml.Node, format string, args ...any) {
	api := yamldoc.Scalar(yamldoc.MapValue(n, "apiVersion")) + " " + yamldoc.Scalar(yamldoc.MapValue(n, "kind"))
	d.problems = append(d.problems, problem{line: d.seg.line + n.Line - 1, reason: fmt.Sprintf(format, args...), api: api})
}

// rewrite returns the segment rewritten; an error means the stream does
// not parse, and no file is rewritten.
func (d *document) rewrite() ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(d.seg.data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return d.seg.data, nil
	} else if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", yamldoc.ShiftLines(err, d.seg.line-1))
	}
	if len(doc.Content) == 0 {
		return d.seg.data, nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("line %d: the document's end is not where the scan cuts it (a --- or ... line inside it?)", d.seg.line)
	}
	root := doc.Content[0]
	objs := objectNodes(root)
	wants := make([]map[string]any, len(objs))
	// Keys' lines are taken before any edit, for the splice.
	spliceable := len(objs) == 1 && objs[0] == root
	if spliceable {
		d.pos = map[*yaml.Node][]keyPos{}
		capture(root, d.pos)
		_, spliceable = d.pos[root]
	}
	for i, o := range objs {
		old, err := decode(o)
		if err != nil {
			// The document stays as it was, the objects moved before
			// this one too.
			d.changes = nil
			d.problems = append(d.problems, problem{line: d.seg.line + o.Line - 1, reason: err.Error(), api: anyAPI})
			return d.seg.data, nil
		}
		wants[i] = old
		if want, ok := d.object(o, old, o == root && spliceable); ok {
			wants[i] = want
		}
	}
	if len(d.texts) == 0 && !d.edited {
		return d.seg.data, nil
	}
	var out []byte
	var err error
	if d.edited && !spliceable {
		out, err = d.encodeWhole(root)
	} else {
		out, err = d.splice(root)
	}
	if err == nil {
		err = verify(out, wants)
	}
	if err != nil {
		// Every move of this document is undone: none of it is written.
		d.problems = append(d.problems, problem{line: d.seg.line + root.Line - 1, api: anyAPI,
			reason: fmt.Sprintf("the rewritten document would not be exactly the conversion (%v); convert it by hand", err)})
		d.changes = nil
		return d.seg.data, nil
	}
	return out, nil
}

// capture notes the keys of every block mapping under n whose keys each
// start a line, at one column, in order.
func capture(n *yaml.Node, pos map[*yaml.Node][]keyPos) {
	switch n.Kind {
	case yaml.MappingNode:
		var keys []keyPos
		ok := n.Style&yaml.FlowStyle == 0 && len(n.Content) > 0
		for i := 0; i+1 < len(n.Content) && ok; i += 2 {
			k := n.Content[i]
			ok = k.Kind == yaml.ScalarNode && (i == 0 || k.Column == keys[0].col && k.Line > keys[len(keys)-1].line)
			keys = append(keys, keyPos{name: k.Value, line: k.Line, col: k.Column})
		}
		if ok {
			pos[n] = keys
		}
		for i := 1; i < len(n.Content); i += 2 {
			capture(n.Content[i], pos)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			capture(c, pos)
		}
	}
}

// object moves one object, if it is to move, and returns what it must
// read back as.
func (d *document) object(o *yaml.Node, old map[string]any, atRoot bool) (map[string]any, bool) {
	avNode, kindNode := yamldoc.MapValue(o, "apiVersion"), yamldoc.MapValue(o, "kind")
	av, kind := yamldoc.Scalar(avNode), yamldoc.Scalar(kindNode)
	if av == "" || kind == "" || !d.f.Moves(av, kind) {
		return nil, false
	}
	group, version := catalog.SplitAPIVersion(av)
	c, ok := d.f.lookup(group, version, kind)
	if !ok {
		d.problem(o, "%s %s: Sunset knows no replacement to move it to", av, kind)
		return nil, false
	}
	if c.Method == convert.Refused {
		d.problem(o, "%s %s is not moved: %s", av, kind, c.Reason)
		return nil, false
	}
	var want map[string]any
	if d.patch {
		// A patch is part of an object: it moves only where it holds none
		// of the fields the conversion would change or refuse, so that
		// the object it patches, moved, means what it meant patched.
		want = maps.Clone(old)
		want["apiVersion"], want["kind"] = c.To.APIVersion(), c.To.Kind
		if c.Method != convert.SameFields {
			conv, err := d.f.Conversions.Convert(old)
			if err == nil {
				conv, err = normalize(conv)
			}
			if err != nil || !reflect.DeepEqual(conv, want) {
				d.problem(o, "a kustomize patch of %s %s: moving it to %s changes fields it holds, or is refused for it (%s); move the patch by hand", av, kind, c.To, c.Reason)
				return nil, false
			}
		}
	} else {
		conv, err := d.f.Conversions.Convert(old)
		var refused *convert.RefusedError
		if errors.As(err, &refused) {
			d.problem(o, "%s %s is not moved to %s: %s", av, kind, c.To, refused.Reason)
			return nil, false
		}
		if err != nil {
			d.problem(o, "%v", err)
			return nil, false
		}
		if want, err = normalize(conv); err != nil {
			d.problem(o, "%v", err)
			return nil, false
		}
	}
	// apiVersion and kind are replaced in the text where they can be;
	// whatever else changed is edited in the node tree.
	rest := maps.Clone(old)
	for _, k := range []string{"apiVersion", "kind"} {
		n := avNode
		if k == "kind" {
			n = kindNode
		}
		if old[k] == want[k] {
			continue
		}
		if d.textFits(n) {
			d.texts = append(d.texts, textEdit{node: n, value: want[k].(string)})
			rest[k] = want[k]
		}
	}
	if !reflect.DeepEqual(rest, want) {
		if d.json {
			d.problem(o, "a JSON manifest: moving %s %s to %s changes fields (%s), and JSON is rewritten only where apiVersion alone changes; convert it by hand, or write it as YAML", av, kind, c.To, c.Reason)
			d.texts = slices.DeleteFunc(d.texts, func(t textEdit) bool { return t.node == avNode || t.node == kindNode })
			return nil, false
		}
		if atRoot {
			d.old, d.want = rest, want
		}
		if err := editNode(o, rest, want, ""); err != nil {
			d.problem(o, "%s %s: %v; convert it by hand", av, kind, err)
			// Its node may be edited in part: should another object of
			// the document be written, the check of the whole leaves it.
			d.texts = slices.DeleteFunc(d.texts, func(t textEdit) bool { return t.node == avNode || t.node == kindNode })
			return nil, false
		}
		d.edited = true
	}
	meta, _ := old["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	d.changes = append(d.changes, Change{Kind: kind, Name: name, Line: d.seg.line + o.Line - 1, From: av, To: c.To.APIVersion()})
	if c.To.Kind != kind {
		d.changes[len(d.changes)-1].To += " " + c.To.Kind
	}
	return want, true
}

// textFits reports whether n's value can be replaced in the text: a
// one-line plain or quoted scalar found where the parser says it is.
func (d *document) textFits(n *yaml.Node) bool {
	_, _, ok := scalarSpan(d.seg.data, n)
	return ok
}

// scalarSpan finds n, a one-line scalar, in data (the text it was parsed
// from).
func scalarSpan(data []byte, n *yaml.Node) (start, end int, ok bool) {
	if n == nil || n.Kind != yaml.ScalarNode || strings.ContainsAny(n.Value, "\n\r\"'\\") {
		return 0, 0, false
	}
	off := 0
	for line := 1; line < n.Line; line++ {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return 0, 0, false
		}
		off += i + 1
	}
	for col := 1; col < n.Column; col++ {
		if off >= len(data) || data[off] == '\n' {
			return 0, 0, false
		}
		_, size := utf8.DecodeRune(data[off:])
		off += size
	}
	var token string
	switch n.Style {
	case 0:
		token = n.Value
	case yaml.DoubleQuotedStyle:
		token = `"` + n.Value + `"`
	case yaml.SingleQuotedStyle:
		token = "'" + n.Value + "'"
	default:
		return 0, 0, false
	}
	if !bytes.HasPrefix(data[off:], []byte(token)) {
		return 0, 0, false
	}
	return off, off + len(token), true
}

// applyTexts replaces the scalars of texts in data, the text they were
// parsed from.
func applyTexts(data []byte, texts []textEdit) ([]byte, error) {
	type span struct {
		start, end int
		text       string
	}
	var spans []span
	for _, t := range texts {
		start, end, ok := scalarSpan(data, t.node)
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not where it was parsed", t.node.Line, t.node.Value)
		}
		text := t.value
		switch t.node.Style {
		case yaml.DoubleQuotedStyle:
			text = `"` + text + `"`
		case yaml.SingleQuotedStyle:
			text = "'" + text + "'"
		}
		spans = append(spans, span{start, end, text})
	}
	slices.SortFunc(spans, func(a, b span) int { return b.start - a.start })
	out := slices.Clone(data)
	for _, s := range spans {
		out = slices.Concat(out[:s.start], []byte(s.text), out[s.end:])
	}
	return out, nil
}
