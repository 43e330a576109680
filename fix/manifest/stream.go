package manifest

import (
	"bytes"
	"fmt"

	"github.com/kube-sunset/sunset/internal/yamldoc"
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
		if yamldoc.IsMarker(l) && content {
			segs = append(segs, segment{data: data[start:i], line: startLine})
			start, startLine, content = i, line, false
		}
		if !content && !yamldoc.IsMarker(l) {
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
