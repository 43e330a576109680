package auditjson

import (
	"encoding/json"

	"github.com/kube-sunset/sunset/classify"
)

type envelope struct {
	Kind       string   `json:"kind"`
	APIVersion string   `json:"apiVersion"`
	Items      rawItems `json:"items"`
}

// rawItems is the items of an EventList, undecoded: the bytes of the array,
// nil for null. Of repeated keys the last wins, as with any value
// encoding/json replaces; lists counts the arrays seen.
type rawItems struct {
	raw   []byte
	lists int
}

func (r *rawItems) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case '[':
		// b is part of the body, which the caller keeps.
		r.raw = b
		r.lists++
		return nil
	case 'n':
		r.raw = nil
		return nil
	}
	// The error a slice gives for this value, named by encoding/json.
	var items []json.RawMessage
	return json.Unmarshal(b, &items)
}

type wireObjectRef struct {
	Resource    text[resourceLimit] `json:"resource"`
	APIGroup    text[groupLimit]    `json:"apiGroup"`
	APIVersion  text[versionLimit]  `json:"apiVersion"`
	Subresource text[subresLimit]   `json:"subresource"`
}

// wireUser is an audit event's user or impersonatedUser. Its groups and
// other extra keys are not decoded at all.
type wireUser struct {
	Username text[usernameLimit] `json:"username"`
	// Only the pod-bound token's keys are decoded, the first value of
	// each. PodUID is checked for its type alone (a malformed one makes a
	// malformed event); Sunset keeps no pod UID.
	Extra struct {
		PodName  firstText[nameLimit] `json:"authentication.kubernetes.io/pod-name"`
		PodUID   stringsOnly          `json:"authentication.kubernetes.io/pod-uid"`
		NodeName firstText[nameLimit] `json:"authentication.kubernetes.io/node-name"`
	} `json:"extra"`
}

// wireEvent is what the decoder reads of an event. Every field the event
// keeps is bounded as it is read (bounded.go).
type wireEvent struct {
	Kind       text[wordLimit] `json:"kind"`
	APIVersion text[wordLimit] `json:"apiVersion"`
	AuditID    auditID         `json:"auditID"`
	Stage      text[wordLimit] `json:"stage"`
	RequestURI text[uriLimit]  `json:"requestURI"`
	Verb       text[wordLimit] `json:"verb"`
	User       wireUser        `json:"user"`
	// ImpersonatedUser is who the request was made as, when the caller
	// impersonated someone (kubectl --as).
	ImpersonatedUser *wireUser `json:"impersonatedUser"`
	SourceIPs        sourceIPs `json:"sourceIPs"`
	// RequestObject is the raw value where it lies in the input, not a
	// copy: only the dry-run flag of a DELETE and field rules read it,
	// and the caller copies it only for the events it keeps it for. It
	// is never stored or logged.
	RequestObject  rawValue             `json:"requestObject"`
	UserAgent      text[userAgentLimit] `json:"userAgent"`
	ObjectRef      *wireObjectRef       `json:"objectRef"`
	ResponseStatus *struct {
		Code int32 `json:"code"`
	} `json:"responseStatus"`
	// Only the two deprecation annotations are decoded; every other
	// annotation is skipped where it lies.
	Annotations              deprecationAnnotations `json:"annotations"`
	RequestReceivedTimestamp text[timeLimit]        `json:"requestReceivedTimestamp"`
	StageTimestamp           text[timeLimit]        `json:"stageTimestamp"`
	// IdentityTimestamp is the requestReceivedTimestamp of the event as
	// it first happened, which Shift keeps when it moves the event in
	// time: the request's identity is made of it. kube-apiserver never
	// writes it.
	IdentityTimestamp text[timeLimit] `json:"sunsetIdentityTimestamp"`
}

// deprecationAnnotations reads the two deprecation annotations
// (decodeAnnotations). Annotations are a map in the audit types, so keys
// match exactly, not in any case as struct fields would.
type deprecationAnnotations struct {
	annotationValues
}

func (a *deprecationAnnotations) UnmarshalJSON(b []byte) error {
	if !mayNameDeprecation(b) {
		// Valid JSON (the caller's decoder checked it) naming neither key.
		return nil
	}
	end, err := decodeAnnotations(b, 0, 1, &a.annotationValues, nil)
	if err != nil {
		return err
	}
	return scanned(end)
}

// wireItem is an event type the fast path can decode into.
type wireItem interface {
	event(raw []byte) (classify.Event, error)
}

func (w *wireEvent) event(raw []byte) (classify.Event, error) { return convert(w, raw) }
