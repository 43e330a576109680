package auditjson

import (
	"encoding/json"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
)

// wireEventWithAdmission is a wireEvent whose annotations are also read for
// admission webhook facts. It is used only for bodies and lines that
// admission.MayHave flags; its annotations field, being less nested,
// replaces the embedded one when decoding.
type wireEventWithAdmission struct {
	wireEvent
	Annotations annotationsWithAdmission `json:"annotations"`
}

func (w *wireEventWithAdmission) event(raw []byte) (aggregate.Event, error) {
	w.wireEvent.Annotations = w.Annotations.deprecation
	ev, err := convert(&w.wireEvent, raw)
	ev.Admission = w.Annotations.facts
	return ev, err
}

// annotationsWithAdmission decodes the deprecation annotations exactly as
// wireEvent does and, when this event's own annotations (not just its
// batch) may hold webhook annotations, the admission facts too.
type annotationsWithAdmission struct {
	deprecation deprecationAnnotations
	facts       *admission.Facts
}

func (a *annotationsWithAdmission) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &a.deprecation); err != nil {
		return err
	}
	if !admission.MayHave(b) {
		return nil
	}
	// Raw values: only the keys admission reads are decoded, and a patch
	// annotation's content is never turned into a string.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	a.facts = admission.Parse(m)
	return nil
}
