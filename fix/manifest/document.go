package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/scan"
)

// problem is an object, or a document, left as it was.
type problem struct {
	line   int
	reason string
	// api is the object's "apiVersion kind" when it is an object left at
	// an API that moves.
	api string
}

// anyAPI is the api of a problem that leaves a whole file, whatever
// objects it holds.
const anyAPI = "*"

// segment is one document of a stream with what precedes it (its "---"
// line, comments), as the bytes of the file; line is its first line.
type segment struct {
	data []byte
	line int
}

// rewriteStream rewrites every document of a YAML or JSON stream. A
// document that does not parse leaves the whole file as it was; a refused
// object leaves its document's other objects to be moved.
func rewriteStream(data []byte, f Fixer, isJSON, patch bool) ([]byte, []Change, []problem) {
	var out bytes.Buffer
	var changes []Change
	var problems []problem
	for _, s := range splitDocuments(data) {
		if len(s.data) > scan.MaxDocumentSize {
			return data, nil, []problem{{line: 0, reason: fmt.Sprintf("too large: the YAML document at line %d is larger than %d MiB", s.line, scan.MaxDocumentSize>>20), api: anyAPI}}
		}
		d := &document{seg: s, f: f, json: isJSON, patch: patch}
		text, err := d.rewrite()
		if err != nil {
			return data, nil, []problem{{line: 0, reason: err.Error(), api: anyAPI}}
		}
		out.Write(text)
		changes = append(changes, d.changes...)
		problems = append(problems, d.problems...)
	}
	return out.Bytes(), changes, problems
}

// splitDocuments cuts a stream at its document markers, as the scan does,
// keeping every byte: the segments joined are data.
func splitDocuments(data []byte) []segment {
	var segs []segment
	start, startLine, line, content := 0, 1, 1, false
	for i := 0; i < len(data); {
		next := len(data)
		if end := bytes.IndexByte(data[i:], '\n'); end >= 0 {
			next = i + end + 1
		}
		l := data[i:next]
		if isMarker(l) && content {
			segs = append(segs, segment{data: data[start:i], line: startLine})
			start, startLine, content = i, line, false
		}
		if !content && !isMarker(l) {
			t := bytes.TrimSpace(l)
			content = len(t) > 0 && t[0] != '#' && t[0] != '%'
		}
		i = next
		line++
	}
	if start < len(data) {
		segs = append(segs, segment{data: data[start:], line: startLine})
	}
	return segs
}

func isMarker(l []byte) bool {
	if !bytes.HasPrefix(l, []byte("---")) && !bytes.HasPrefix(l, []byte("...")) {
		return false
	}
	return len(l) == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\n' || l[3] == '\r'
}

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
	api := scalar(mapValue(n, "apiVersion")) + " " + scalar(mapValue(n, "kind"))
	d.problems = append(d.problems, problem{line: d.seg.line + n.Line - 1, reason: fmt.Sprintf(format, args...), api: api})
}

var yamlLine = regexp.MustCompile(`\bline (\d+)\b`)

// rewrite returns the segment rewritten; an error means the stream does
// not parse, and no file is rewritten.
func (d *document) rewrite() ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(d.seg.data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return d.seg.data, nil
	} else if err != nil {
		msg := yamlLine.ReplaceAllStringFunc(err.Error(), func(m string) string {
			n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
			return "line " + strconv.Itoa(n+d.seg.line-1)
		})
		return nil, fmt.Errorf("not YAML or JSON: %s", msg)
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
	avNode, kindNode := mapValue(o, "apiVersion"), mapValue(o, "kind")
	av, kind := scalar(avNode), scalar(kindNode)
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
	if root.Line < 1 || root.Line > len(lines) || isMarker(lines[root.Line-1]) {
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
	items := mapValue(root, "items")
	if !strings.HasSuffix(scalar(mapValue(root, "kind")), "List") || items == nil || items.Kind != yaml.SequenceNode {
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

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
