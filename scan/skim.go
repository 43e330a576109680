package scan

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kube-sunset/sunset/internal/yamldoc"
)

// A YAML document parsed whole becomes a node tree of up to about 95
// times its bytes (286 MiB for 3 MiB of "a: b" lines, measured), and a
// Helm release record is data anyone who may write Secrets controls. So a
// document over treeDocumentSize is skimmed instead: its lines are lexed
// once, without building anything, to find where its top-level entries
// start, and only the entries that say what the object is (apiVersion,
// kind, metadata's name and namespace, a List's items) are parsed, each
// alone. A field rule that reads the whole object still needs it parsed
// whole, up to bodyDocumentSize.
const (
	treeDocumentSize = 256 << 10
	bodyDocumentSize = 1 << 20
	// entrySize bounds one entry parsed alone (apiVersion: v1, a
	// metadata block): annotations, the largest part of metadata, are
	// under 256 KiB in kube-apiserver.
	entrySize = 512 << 10
)

// plainKey is a block mapping key the skim reads: a plain one, not a
// merge key.
var plainKey = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9_.\-/]*):(?:[ \t]|\r?$)`)

// skimmer reads the identity of the objects of one large document.
type skimmer struct {
	j     Judge
	doc   []byte
	lines []skimLine
	line  int // the document's first line in its stream
}

// entries are the keys of the block mapping whose entries start at
// column indent in lines [from, to), the first of which starts at
// column first: where each entry's lines start, and its key's offset.
func (s *skimmer) entries(from, to, first, indent int) (map[string][2]int, []string, error) {
	out := map[string][2]int{}
	var order []string
	for i := from; i < to; i++ {
		l := s.lines[i]
		col := int(l.indent)
		if i == from {
			col = first
		}
		if !l.clean || !l.content || i != from && (col > indent || col == indent && s.seqItem(l)) {
			// Deeper, or a sequence at the mapping's column: a value.
			continue
		}
		if col != indent {
			return nil, nil, fmt.Errorf("line %d: %w", s.line+i, errNotPlainBlock)
		}
		m := plainKey.FindSubmatch(s.doc[int(l.start)+col : int(l.end)])
		if m == nil || string(m[1]) == "<<" {
			return nil, nil, fmt.Errorf("line %d: %w", s.line+i, errNotPlainBlock)
		}
		key := string(m[1])
		if _, dup := out[key]; dup {
			return nil, nil, fmt.Errorf("line %d: mapping key %q already defined", s.line+i, key)
		}
		out[key] = [2]int{i, int(l.start) + col}
		order = append(order, key)
	}
	return out, order, nil
}

// starts reports whether line i can start an entry or item.
func (s *skimmer) starts(i int) bool { return s.lines[i].clean && s.lines[i].content }

// seqItem reports whether l starts a block sequence's item.
func (s *skimmer) seqItem(l skimLine) bool {
	r := s.doc[int(l.start)+int(l.indent) : int(l.end)]
	return len(r) > 0 && r[0] == '-' && (len(r) == 1 || r[1] == ' ' || r[1] == '\r')
}

// entryEnd is the line after the entry starting at line i of a mapping
// at indent: the next line that starts an entry at that column or less.
func (s *skimmer) entryEnd(i, to, indent int) int {
	for i++; i < to; i++ {
		if l := s.lines[i]; l.clean && l.content && (int(l.indent) < indent || int(l.indent) == indent && !s.seqItem(l)) {
			return i
		}
	}
	return to
}

// value parses one entry (from its key's offset to the end of its lines)
// alone and returns its value.
func (s *skimmer) value(key string, at [2]int, to, indent int) (*yaml.Node, error) {
	end := s.entryEnd(at[0], to, indent)
	text := s.doc[at[1]:int(s.lines[end-1].end)]
	if len(text) > entrySize {
		return nil, &TooLargeError{What: fmt.Sprintf("%s at line %d", key, s.line+at[0]), Limit: entrySize}
	}
	var n yaml.Node
	if err := yaml.Unmarshal(text, &n); err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", yamldoc.ShiftLines(err, s.line+at[0]-1))
	}
	if len(n.Content) == 0 {
		return nil, nil
	}
	return yamldoc.MapValue(n.Content[0], key), nil
}

// object reads the object whose mapping's entries start at column indent
// in lines [from, to), the first at column first.
func (s *skimmer) object(from, to, first, indent int) ([]Object, error) {
	keys, order, err := s.entries(from, to, first, indent)
	if err != nil || len(order) == 0 {
		return nil, err
	}
	str := func(key string) (string, error) {
		at, ok := keys[key]
		if !ok {
			return "", nil
		}
		n, err := s.value(key, at, to, indent)
		return yamldoc.Scalar(n), err
	}
	apiVersion, err := str("apiVersion")
	if err != nil {
		return nil, err
	}
	kind, err := str("kind")
	if err != nil || apiVersion == "" || kind == "" {
		return nil, err
	}
	obj := Object{APIVersion: apiVersion, Kind: kind, Line: s.line + keys[order[0]][0]}
	if at, ok := keys["metadata"]; ok {
		if obj.Name, obj.Namespace, err = s.metadata(at, to, indent); err != nil {
			return nil, err
		}
	}
	at, ok := keys["items"]
	if !ok || len(kind) < 4 || kind[len(kind)-4:] != "List" {
		return []Object{obj}, nil
	}
	return s.items(at, s.entryEnd(at[0], to, indent), indent)
}

// metadata reads metadata's name and namespace, skimming metadata too
// when it is large.
func (s *skimmer) metadata(at [2]int, to, indent int) (string, string, error) {
	end := s.entryEnd(at[0], to, indent)
	if int(s.lines[end-1].end)-at[1] <= entrySize {
		n, err := s.value("metadata", at, to, indent)
		return yamldoc.Scalar(yamldoc.MapValue(n, "name")), yamldoc.Scalar(yamldoc.MapValue(n, "namespace")), err
	}
	child := -1
	for i := at[0] + 1; i < end; i++ {
		if l := s.lines[i]; l.clean && l.content {
			child = int(l.indent)
			break
		}
	}
	if child <= indent {
		return "", "", fmt.Errorf("line %d: %w", s.line+at[0], errNotPlainBlock)
	}
	keys, _, err := s.entries(at[0]+1, end, child, child)
	if err != nil {
		return "", "", err
	}
	var out [2]string
	for i, key := range []string{"name", "namespace"} {
		if k, ok := keys[key]; ok {
			n, err := s.value(key, k, end, child)
			if err != nil {
				return "", "", err
			}
			out[i] = yamldoc.Scalar(n)
		}
	}
	return out[0], out[1], nil
}

// items reads the objects of a List's items, the entry at (line, key
// offset) of the mapping at indent, which ends at line to.
func (s *skimmer) items(at [2]int, to, indent int) ([]Object, error) {
	if rest := bytes.TrimSpace(s.doc[at[1]+len("items:") : s.lines[at[0]].end]); len(rest) > 0 && rest[0] != '#' {
		// items: [] or another flow sequence: small, or not skimmed.
		n, err := s.value("items", at, to, indent)
		if err != nil || n == nil || n.Kind != yaml.SequenceNode {
			return nil, err
		}
		var out []Object
		for _, item := range n.Content {
			o, ok, err := s.j.object(item)
			if err != nil {
				return out, err
			}
			if ok {
				o.Line += s.line + at[0] - 1
				out = append(out, o)
			}
		}
		return out, nil
	}
	var out []Object
	dash, start := -1, -1
	flush := func(end int) error {
		if start < 0 {
			return nil
		}
		l := s.lines[start]
		col := dash + 1
		for int(l.start)+col < int(l.end) && s.doc[int(l.start)+col] == ' ' {
			col++
		}
		from := start
		if int(l.start)+col >= int(l.end) || s.doc[int(l.start)+col] == '\r' || s.doc[int(l.start)+col] == '#' {
			// "-" alone: the item's mapping starts on the next line.
			for from++; from < end && !s.starts(from); from++ {
			}
			if from == end {
				return nil
			}
			col = int(s.lines[from].indent)
		}
		objs, err := s.object(from, end, col, col)
		out = append(out, objs...)
		if len(out) > MaxObjects {
			return errTooManyObjects
		}
		return err
	}
	for i := at[0] + 1; i < to; i++ {
		l := s.lines[i]
		if !l.clean || !l.content {
			continue
		}
		if dash < 0 {
			dash = int(l.indent)
		}
		if int(l.indent) > dash {
			continue
		}
		rest := s.doc[int(l.start)+int(l.indent) : int(l.end)]
		if int(l.indent) < dash || rest[0] != '-' || len(rest) > 1 && rest[1] != ' ' && rest[1] != '\r' {
			return out, fmt.Errorf("line %d: %w", s.line+i, errNotPlainBlock)
		}
		if err := flush(i); err != nil {
			return out, err
		}
		start = i
	}
	return out, flush(to)
}

// skimObjects reads the objects of a document over treeDocumentSize:
// JSON with a streaming decoder, YAML by its lines.
func (j Judge) skimObjects(doc []byte, line int) ([]Object, error) {
	var out []Object
	var err error
	if t := bytes.TrimLeft(doc, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		out, err = jsonObjects(doc, line)
	} else {
		s := &skimmer{j: j, doc: doc, line: line}
		if s.lines, err = skimLines(doc); err == nil {
			first := 0
			for first < len(s.lines) && !s.starts(first) {
				first++
			}
			// A sequence at the top is not an object, as parsed whole.
			if first < len(s.lines) && !s.seqItem(s.lines[first]) {
				out, err = s.object(first, len(s.lines), int(s.lines[first].indent), int(s.lines[first].indent))
			}
		}
	}
	if errors.Is(err, errNotPlainBlock) {
		return nil, &TooLargeError{What: fmt.Sprintf("the YAML document at line %d, not plain block YAML,", line), Limit: treeDocumentSize}
	}
	if err != nil {
		return out, err
	}
	for _, o := range out {
		if j.WantsBody(o.APIVersion, o.Kind) {
			// A field rule reads the object whole: parsed whole.
			if len(doc) > bodyDocumentSize {
				return nil, &TooLargeError{What: fmt.Sprintf("the YAML document at line %d, which a field rule reads whole,", line), Limit: bodyDocumentSize}
			}
			return j.treeObjects(doc, line)
		}
	}
	return out, nil
}
