package auditjson

import (
	"bytes"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/classify"
)

// wireEventWithAdmission is a wireEvent whose annotations are also read for
// admission webhook facts. It is used only for bodies and lines that
// admission.MayHave flags; its annotations field, being less nested,
// replaces the embedded one when decoding.
type wireEventWithAdmission struct {
	wireEvent
	Annotations annotationsWithAdmission `json:"annotations"`
}

func (w *wireEventWithAdmission) event(raw []byte) (classify.Event, error) {
	w.wireEvent.Annotations = w.Annotations.deprecation
	ev, err := convert(&w.wireEvent, raw)
	ev.Admission = w.Annotations.facts
	return ev, err
}

// annotationsWithAdmission decodes the deprecation annotations exactly as
// wireEvent does and, when this event's own annotations (not just its
// batch) may hold webhook annotations, the admission facts too, from at
// most maxWebhookAnnotations of them (decodeAnnotations).
type annotationsWithAdmission struct {
	deprecation deprecationAnnotations
	facts       *admission.Facts
}

func (a *annotationsWithAdmission) UnmarshalJSON(b []byte) error {
	webhooks := admission.MayHave(b)
	if !webhooks {
		// Most events of a batch with webhook annotations have none:
		// they cost a scan, not a second decode.
		return a.deprecation.UnmarshalJSON(b)
	}
	// Raw values: only the keys admission reads are kept, and a patch
	// annotation's content is never turned into a string.
	var w webhookAnnotations
	end, err := decodeAnnotations(b, 0, 1, &a.deprecation.annotationValues, &w)
	if err != nil {
		return err
	}
	a.facts = admission.Parse(w.raw())
	return scanned(end)
}

// mayNameDeprecation is false only when decoding b into
// deprecationAnnotations would certainly leave it empty without error. b
// is valid JSON (the caller's decoder has checked it); anything but an
// object takes the full decode. encoding/json matches keys case-insensitively, after unescaping,
// and folds k and s with the Kelvin sign and the long s; both keys have a
// slash before a part without k or s ("deprecated", "removed-relea"), so
// every slash, escaped or not, is looked after, and any escape right after
// one is taken as a match.
func mayNameDeprecation(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != '{' || bytes.Contains(b, []byte(`\u002f`)) || bytes.Contains(b, []byte(`\u002F`)) {
		return true
	}
	for i := bytes.IndexByte(b, '/'); i >= 0; {
		rest := b[i+1:]
		if bytes.IndexByte(rest[:min(len(rest), 16)], '\\') >= 0 ||
			hasPrefixFoldASCII(rest, "deprecated") || hasPrefixFoldASCII(rest, "removed-relea") {
			return true
		}
		j := bytes.IndexByte(rest, '/')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// hasPrefixFoldASCII reports whether b starts with lower (lowercase ASCII)
// in any ASCII case.
func hasPrefixFoldASCII(b []byte, lower string) bool {
	if len(b) < len(lower) {
		return false
	}
	for j := range len(lower) {
		c := b[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[j] {
			return false
		}
	}
	return true
}
