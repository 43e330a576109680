package scan

import (
	"bytes"
	"errors"

	"github.com/kube-sunset/sunset/internal/yamldoc"
)

// skimLine is one line of a skimmed document.
//
// Offsets are 32 bits, as a document is at most MaxDocumentSize: a line
// takes 16 bytes, so the lines of a document of short ones take about
// twice its size, where its node tree would take ninety times.
type skimLine struct {
	start, end uint32 // offsets of the line in the document, without its newline
	indent     uint32
	// clean is true for a line that starts outside any scalar or flow
	// collection begun on an earlier line: only such a line can start
	// an entry.
	clean bool
	// content is true for a line with more than spaces and a comment.
	content bool
}

var errNotPlainBlock = errors.New("not plain block YAML")

// skimLines lexes doc line by line. It fails on what would make a line's
// place in the document depend on more than its indentation: a quoted
// scalar or flow collection still open at the end.
func skimLines(doc []byte) ([]skimLine, error) {
	var lines []skimLine
	var quote byte
	flow := 0
	block := -1 // the parent column of a block scalar being read, or -1
	for i := 0; i < len(doc); {
		end := bytes.IndexByte(doc[i:], '\n')
		next := len(doc)
		if end < 0 {
			end = len(doc)
		} else {
			end += i
			next = end + 1
		}
		l := doc[i:end]
		indent := 0
		for indent < len(l) && l[indent] == ' ' {
			indent++
		}
		blank := indent == len(l) || l[indent] == '\r'
		line := skimLine{start: uint32(i), end: uint32(end), indent: uint32(indent)}
		i = next
		if block >= 0 {
			if blank || indent > block {
				lines = append(lines, line)
				continue
			}
			block = -1
		}
		line.clean = quote == 0 && flow == 0
		line.content = !blank && (!line.clean || l[indent] != '#')
		if line.clean && indent == 0 && (yamldoc.IsMarker(l) || l[0] == '%') {
			// The document's start marker, or a directive before it.
			if len(bytes.TrimSpace(l)) > 3 && l[0] != '%' {
				return nil, errNotPlainBlock
			}
			line.content = false
			blank = true
		}
		lines = append(lines, line)
		if blank {
			continue
		}
		var err error
		quote, flow, block, err = lexLine(l, indent, quote, flow)
		if err != nil {
			return nil, err
		}
	}
	if quote != 0 || flow != 0 {
		return nil, errNotPlainBlock
	}
	return lines, nil
}

// lexLine reads one line from pos in the state an earlier line left, and
// returns the state it leaves: an open quote, the flow depth, and the
// parent column of a block scalar that starts on it (or -1).
func lexLine(l []byte, pos int, quote byte, flow int) (byte, int, int, error) {
	nodeStart := true
	nodeCol := pos
	for pos < len(l) {
		c := l[pos]
		if quote != 0 {
			j := pos
			for ; j < len(l); j++ {
				if quote == '"' && l[j] == '\\' {
					j++
					continue
				}
				if l[j] == quote {
					if quote == '\'' && j+1 < len(l) && l[j+1] == '\'' {
						j++
						continue
					}
					break
				}
			}
			if j >= len(l) {
				return quote, flow, -1, nil
			}
			quote, pos, nodeStart = 0, j+1, false
			continue
		}
		spaceBefore := pos == 0 || l[pos-1] == ' ' || l[pos-1] == '\t'
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			pos++
			continue
		case c == '#' && spaceBefore:
			return 0, flow, -1, nil
		case (c == '"' || c == '\'') && nodeStart:
			if flow == 0 {
				nodeCol = pos
			}
			quote = c
			pos++
			continue
		case flow > 0:
			switch c {
			case '[', '{':
				flow++
				nodeStart = true
			case ']', '}':
				flow--
				nodeStart = false
			case ',', ':':
				nodeStart = true
			default:
				nodeStart = false
			}
			pos++
			continue
		case nodeStart && (c == '[' || c == '{'):
			flow = 1
			pos++
			continue
		case nodeStart && (c == '|' || c == '>'):
			return 0, 0, nodeCol, nil
		case nodeStart && c == '-' && (pos+1 == len(l) || l[pos+1] == ' '):
			nodeCol = pos
			pos++
			continue
		case nodeStart && c == '?' && (pos+1 == len(l) || l[pos+1] == ' '):
			return 0, 0, -1, errNotPlainBlock
		case nodeStart && (c == '&' || c == '!'):
			for pos < len(l) && l[pos] != ' ' {
				pos++
			}
			continue
		case c == ':' && (pos+1 == len(l) || l[pos+1] == ' ' || l[pos+1] == '\r'):
			nodeStart = true
			pos++
			continue
		}
		// A plain scalar: to a key's colon, a comment or the end.
		if nodeStart {
			nodeCol = pos
		}
		nodeStart = false
		for pos < len(l) {
			if l[pos] == ':' && (pos+1 == len(l) || l[pos+1] == ' ' || l[pos+1] == '\r') {
				break
			}
			if l[pos] == '#' && (l[pos-1] == ' ' || l[pos-1] == '\t') {
				return 0, 0, -1, nil
			}
			pos++
		}
	}
	return quote, flow, -1, nil
}
