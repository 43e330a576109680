package auditjson

import (
	"bytes"
	"errors"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/classify"
)

// Prefilter sets aside, from its bytes alone and without allocating, an
// audit event that cannot count, so that only the few that may are decoded.
//
// It walks the event's top-level keys once, validating the JSON as it goes,
// and is conservative: anything it cannot be sure of (an escaped or
// non-ASCII top-level key, a repeated object field, an unexpected type) is
// left to the decoder. An event is set aside only when encoding/json would
// decode it to one that Ingest skips, and with the same result.
type Prefilter struct {
	allCompleted bool
	// resources are quoted, as they appear in objectRef.
	resources [][]byte
}

// NewPrefilter returns a Prefilter for what an aggregator may count.
func NewPrefilter(in classify.Interest) *Prefilter {
	p := &Prefilter{allCompleted: in.AllCompleted}
	for _, r := range in.Resources {
		p.resources = append(p.resources, []byte(`"`+r+`"`))
	}
	return p
}

var (
	// A 404 from an API the catalog lists as removed counts; a number
	// cannot be escaped, so a code of 404 always shows as these bytes.
	markerNotFound = []byte(`404`)
)

// span is where a value lies in an event; end is 0 when it is absent.
type span struct{ start, end int }

func (s span) of(b []byte) []byte { return b[s.start:s.end] }

// eventShape is what the prefilter reads from an event's top level.
type eventShape struct {
	kind, apiVersion, stage, verb        span
	annotations, objectRef, responseStat span
	// deprecated is set when the annotations have the key
	// k8s.io/deprecated.
	deprecated bool
	// namesResource is set when a string in objectRef is one of the
	// resources field rules read, or may be: one with an escape, or a
	// container that holds one.
	namesResource bool
	// webhooks is set when an annotation's key may be an admission
	// webhook's (admission.MayHave of the key): only keys are read for
	// webhook facts, so a value that names a webhook changes nothing.
	webhooks bool
	// unsure is set when a key or value the prefilter reads is not
	// plainly what it seems; the event is then decoded.
	unsure bool
}

// inspect walks the event object whose brace is at b[i], depth counting
// it and the containers around it, looking in objectRef for resources
// (quoted). It returns the offset after it, or -1 when the JSON is not
// valid.
func inspect(b []byte, i, depth int, resources [][]byte, sh *eventShape) int {
	return scanObject(b, i, depth, func(key []byte, flags stringFlags, start int) int {
		if flags.plain() && len(key) == 11 && start < len(b) && b[start] == '{' && equalFoldASCII(key, "annotations") {
			// Read as it is validated, in one pass.
			end := readAnnotations(b, start, depth+1, sh)
			if end >= 0 {
				once(b, &sh.annotations, start, end, sh)
			}
			return end
		}
		if flags.plain() && len(key) == 9 && start < len(b) && b[start] == '{' && equalFoldASCII(key, "objectref") {
			end := findResources(b, start, depth+1, resources, sh)
			if end >= 0 {
				once(b, &sh.objectRef, start, end, sh)
			}
			return end
		}
		// A string's flags say whether it has an escape, which the
		// values read below (kind, verb, stage, apiVersion: keys of 4, 5
		// and 10 bytes) must not have; the others skip them.
		var end int
		var valueFlags stringFlags
		if n := len(key); (n == 4 || n == 5 || n == 10) && start < len(b) && b[start] == '"' {
			end, valueFlags = scanString(b, start)
		} else {
			end = skipValue(b, start, depth)
		}
		if end < 0 {
			return -1
		}
		if !flags.plain() {
			sh.unsure = true
			return end
		}
		switch len(key) {
		case 4:
			if equalFoldASCII(key, "kind") {
				sh.kind = plainString(b, start, end, valueFlags, sh)
			} else if equalFoldASCII(key, "verb") {
				sh.verb = plainString(b, start, end, valueFlags, sh)
			}
		case 5:
			if equalFoldASCII(key, "stage") {
				sh.stage = plainString(b, start, end, valueFlags, sh)
			}
		case 9:
			if equalFoldASCII(key, "objectref") {
				// null: an object is read above.
				once(b, &sh.objectRef, start, end, sh)
			}
		case 10:
			if equalFoldASCII(key, "apiversion") {
				sh.apiVersion = plainString(b, start, end, valueFlags, sh)
			}
		case 11:
			if equalFoldASCII(key, "annotations") {
				// null: an object is read above.
				once(b, &sh.annotations, start, end, sh)
			}
		case 14:
			if equalFoldASCII(key, "responsestatus") {
				once(b, &sh.responseStat, start, end, sh)
			}
		}
		return end
	})
}

// readAnnotations reads the keys of the annotations object at b[start],
// depth counting it and the containers around it, and returns the offset
// after it, or -1 when it is not valid JSON. They are a map's keys: they
// match exactly, and only an escape can hide one from the prefilter.
func readAnnotations(b []byte, start, depth int, sh *eventShape) int {
	return scanObject(b, start, depth, func(key []byte, flags stringFlags, start int) int {
		if flags&flagEscaped != 0 {
			sh.unsure = true
		} else if string(key) == AnnotationDeprecated {
			sh.deprecated = true
		} else if !sh.webhooks && admission.MayHave(key) {
			// A key is short: one search each, where the whole
			// annotations took one for every 'w' and '.' in them.
			sh.webhooks = true
		}
		return skipValue(b, start, depth)
	})
}

// findResources walks the objectRef object at b[start], depth counting it
// and the containers around it, and returns the offset after it, or -1
// when it is not valid JSON. A field rule's resource is objectRef's
// resource string, so it is enough to compare each string value, raw,
// with the resources: without an escape, its bytes are its value. Keys
// are not resources; a value with an escape, or a container holding a
// resource's bytes, is taken as one.
func findResources(b []byte, start, depth int, resources [][]byte, sh *eventShape) int {
	return scanObject(b, start, depth, func(_ []byte, _ stringFlags, start int) int {
		if start < len(b) && b[start] == '"' {
			end, flags := scanString(b, start)
			if end < 0 {
				return -1
			}
			if flags&flagEscaped != 0 && len(resources) > 0 {
				sh.namesResource = true
			}
			for _, r := range resources {
				if string(b[start:end]) == string(r) {
					sh.namesResource = true
				}
			}
			return end
		}
		end := skipValue(b, start, depth)
		if end < 0 {
			return -1
		}
		value := b[start:end]
		if bytes.IndexByte(value, '\\') >= 0 && len(resources) > 0 {
			sh.namesResource = true
		}
		for _, r := range resources {
			if bytes.Contains(value, r) {
				sh.namesResource = true
			}
		}
		return end
	})
}

// plainString is the content of the value at b[start:end], when it is a
// string without escapes (flags are its scanString's); encoding/json keeps
// the last of repeated keys, and so does the caller.
func plainString(b []byte, start, end int, flags stringFlags, sh *eventShape) span {
	if b[start] != '"' || flags&flagEscaped != 0 {
		sh.unsure = true
		return span{}
	}
	return span{start + 1, end - 1}
}

// once records an object field's value; encoding/json merges a repeated
// object field into the first, which the prefilter does not follow, and
// fails on anything but an object or null.
func once(b []byte, s *span, start, end int, sh *eventShape) {
	if s.end != 0 || (b[start] != '{' && b[start] != 'n') {
		sh.unsure = true
	}
	*s = span{start, end}
}

// Skip reports whether the event raw, one JSON value, cannot count, and the
// result Ingest would give it. A nil Prefilter sets nothing aside.
func (p *Prefilter) Skip(raw []byte) (classify.SetAside, bool) {
	if p == nil {
		return classify.SetAside{}, false
	}
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return classify.SetAside{}, false
	}
	var sh eventShape
	end := inspect(raw, i, 1, p.resources, &sh)
	if end < 0 || skipSpace(raw, end) != len(raw) {
		return classify.SetAside{}, false
	}
	return p.setAside(raw, &sh)
}

// setAside is judge's verdict with whether the event was a read.
func (p *Prefilter) setAside(b []byte, sh *eventShape) (classify.SetAside, bool) {
	r, skip := p.judge(b, sh)
	if !skip {
		return classify.SetAside{}, false
	}
	switch string(sh.verb.of(b)) {
	case "get", "list", "watch":
		return classify.SetAside{Result: r, Read: true}, true
	}
	return classify.SetAside{Result: r}, true
}

// judge decides from an event's shape.
func (p *Prefilter) judge(b []byte, sh *eventShape) (classify.Result, bool) {
	if p == nil || sh.unsure || sh.stage.end == sh.stage.start {
		// Without a stage the event is invalid: the decoder says so.
		return "", false
	}
	if sh.kind.end != 0 && string(sh.kind.of(b)) != KindEvent {
		return "", false
	}
	if v := sh.apiVersion; v.end != 0 && string(v.of(b)) != APIVersion && string(v.of(b)) != APIVersionV1beta1 {
		return "", false
	}
	// Webhook annotations are counted on their own, at any stage.
	if sh.deprecated || sh.webhooks {
		return "", false
	}
	if stage := string(sh.stage.of(b)); stage != classify.StageResponseComplete && stage != classify.StagePanic {
		return classify.ResultOtherStage, true
	}
	if p.allCompleted || bytes.Contains(sh.responseStat.of(b), markerNotFound) {
		return "", false
	}
	if sh.namesResource {
		return "", false
	}
	return classify.ResultNotDeprecated, true
}

// DecodeBodyFiltered is DecodeBody with the events that p sets aside left
// undecoded and tallied in skipped. Its answer is DecodeBody's for every
// other event, errors included: a body it cannot walk plainly (invalid
// JSON, an unusual envelope) is handed to DecodeBody whole.
func DecodeBodyFiltered(body []byte, p *Prefilter) (events []classify.Event, bad Invalid, skipped classify.Prefiltered, err error) {
	if p != nil {
		if events, bad, skipped, ok := decodeListFiltered(body, p); ok {
			return events, bad, skipped, nil
		}
	}
	events, bad, err = DecodeBody(body)
	return events, bad, classify.Prefiltered{}, err
}

// decodeListFiltered walks an EventList once. ok is false when the body is
// anything else, or anything but plain: DecodeBody then has the last word.
func decodeListFiltered(body []byte, p *Prefilter) (events []classify.Event, bad Invalid, skipped classify.Prefiltered, ok bool) {
	index := 0
	item := func(start int) int {
		defer func() { index++ }()
		var end int
		if start >= len(body) {
			return -1
		}
		if body[start] == '{' {
			var sh eventShape
			if end = inspect(body, start, 3, p.resources, &sh); end < 0 {
				return -1
			}
			if r, skip := p.setAside(body, &sh); skip {
				skipped.Add(r)
				return end
			}
		} else if end = skipValue(body, start, 2); end < 0 {
			return -1
		}
		if !objectOrNull(body[start:end]) {
			// Junk: counted, not decoded.
			bad.addNonObject(index, body[start:end])
			return end
		}
		ev, err := DecodeEvent(body[start:end])
		if err != nil {
			var e *Error
			errors.As(err, &e)
			bad.add(index, e)
			return end
		}
		events = append(events, ev)
		return end
	}
	if !plainEnvelope(body, func(start int) int { return scanArray(body, start, 2, item) }) {
		return nil, Invalid{}, classify.Prefiltered{}, false
	}
	return events, bad, skipped, true
}

// plainEnvelope walks body when it is a plain EventList of
// audit.k8s.io/v1: valid JSON, the three envelope keys once each and
// spelt exactly, items an array, which items walks from its '[' and
// returns the end of. It reports whether body is one.
func plainEnvelope(body []byte, items func(start int) int) bool {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	var kind, apiVersion span
	unusual, listed := false, false
	end := scanObject(body, i, 1, func(key []byte, flags stringFlags, start int) int {
		switch {
		case !flags.plain():
			unusual = true
		case string(key) == "items" && !listed && start < len(body) && body[start] == '[':
			listed = true
			return items(start)
		case string(key) == "kind" && kind.end == 0:
			return envelopeString(body, start, &kind, &unusual)
		case string(key) == "apiVersion" && apiVersion.end == 0:
			return envelopeString(body, start, &apiVersion, &unusual)
		case equalFoldASCII(key, "kind") || equalFoldASCII(key, "apiversion") || equalFoldASCII(key, "items"):
			// Repeated, or in another case, or not a list.
			unusual = true
		}
		return skipValue(body, start, 1)
	})
	return end >= 0 && !unusual && listed && skipSpace(body, end) == len(body) &&
		string(kind.of(body)) == KindEventList && string(apiVersion.of(body)) == APIVersion
}

// envelopeString scans the envelope's string value at body[start] into s,
// marking anything but a plain string unusual.
func envelopeString(body []byte, start int, s *span, unusual *bool) int {
	var end int
	var flags stringFlags
	if start < len(body) && body[start] == '"' {
		end, flags = scanString(body, start)
	} else {
		end = skipValue(body, start, 1)
	}
	if end < 0 {
		return -1
	}
	var sh eventShape
	*s = plainString(body, start, end, flags, &sh)
	*unusual = *unusual || sh.unsure
	return end
}
