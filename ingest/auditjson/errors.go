package auditjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/kube-sunset/sunset/countkey"
)

// Reason classifies why a body or an item was rejected. Values are metric
// label values.
type Reason string

// Reasons for rejecting a body or an item.
const (
	ReasonMalformedJSON   Reason = "malformed_json"
	ReasonWrongKind       Reason = "wrong_kind"
	ReasonWrongAPIVersion Reason = "wrong_api_version"
	ReasonMalformedEvent  Reason = "malformed_event"
	ReasonMissingStage    Reason = "missing_stage"
	ReasonBadTimestamp    Reason = "bad_timestamp"
	// ReasonTooLarge is an item of a streamed list over maxItemBytes, or
	// a body over maxWholeBody that cannot be streamed.
	ReasonTooLarge Reason = "too_large"
)

// Error is a rejected body or event: a bounded reason and a message that
// names the problem without quoting content.
type Error struct {
	Reason  Reason
	Message string
}

func (e *Error) Error() string { return e.Message }

// ItemError is one malformed item of an otherwise valid EventList.
type ItemError struct {
	Index int
	Err   *Error
}

// MaxSamples is how many malformed items of a list Invalid describes; the
// webhook lists them in its answer.
const MaxSamples = 10

// Invalid tallies the malformed items of an EventList. Only the first
// MaxSamples are kept, so that a list of a million bad items costs a count,
// not a million errors: an item that is not a JSON object is counted
// without being decoded at all, unless it is one of the samples.
type Invalid struct {
	// Count is how many items were malformed.
	Count int
	// ByReason counts them by reason; nil when Count is 0.
	ByReason map[Reason]int
	// Samples are the first MaxSamples of them, in the list's order.
	Samples []ItemError
}

// add tallies the malformed item at index.
func (v *Invalid) add(index int, e *Error) {
	v.Count++
	if v.ByReason == nil {
		v.ByReason = make(map[Reason]int, 2)
	}
	v.ByReason[e.Reason]++
	if len(v.Samples) < MaxSamples {
		v.Samples = append(v.Samples, ItemError{Index: index, Err: e})
	}
}

// addNonObject tallies the item raw at index, a JSON value that is neither
// an object nor null, and so an event of reason ReasonMalformedEvent (as
// decoding it would say). It is decoded, for its message, only to be a
// sample.
func (v *Invalid) addNonObject(index int, raw []byte) {
	if len(v.Samples) < MaxSamples {
		_, err := DecodeEvent(raw)
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{ReasonMalformedEvent, "event is not a JSON object"}
		}
		v.add(index, e)
		return
	}
	v.Count++
	if v.ByReason == nil {
		v.ByReason = make(map[Reason]int, 2)
	}
	v.ByReason[ReasonMalformedEvent]++
}

// envelopeError says what is wrong with a body's kind and apiVersion, or
// nil for an EventList or an Event of audit.k8s.io/v1.
func envelopeError(kind, apiVersion string) *Error {
	if apiVersion != APIVersion {
		if apiVersion == "" {
			return &Error{ReasonWrongAPIVersion, fmt.Sprintf("apiVersion is missing; want %q", APIVersion)}
		}
		return &Error{ReasonWrongAPIVersion, fmt.Sprintf("apiVersion %q is not supported; want %q (set --audit-webhook-version=%s on kube-apiserver)", bounded(apiVersion), APIVersion, APIVersion)}
	}
	switch kind {
	case KindEvent, KindEventList:
		return nil
	case "":
		return &Error{ReasonWrongKind, fmt.Sprintf("kind is missing; want %q or %q", KindEventList, KindEvent)}
	default:
		return &Error{ReasonWrongKind, fmt.Sprintf("kind %q is not supported; want %q or %q", bounded(kind), KindEventList, KindEvent)}
	}
}

// syntaxError turns a JSON decoding error into an *Error that names where
// decoding failed but never quotes the input.
func syntaxError(what string, err error) *Error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return &Error{ReasonMalformedJSON, fmt.Sprintf("%s is not valid JSON at byte offset %d: %s", what, se.Offset, se.Error())}
	case errors.As(err, &te):
		if te.Field == "" {
			return &Error{ReasonMalformedEvent, fmt.Sprintf("%s is a JSON %s, want an object", what, te.Value)}
		}
		return &Error{ReasonMalformedEvent, fmt.Sprintf("%s field %q is a JSON %s, want %s", what, te.Field, te.Value, jsonKind(te.Type))}
	default:
		return &Error{ReasonMalformedJSON, fmt.Sprintf("%s is not valid JSON: %v", what, err)}
	}
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// bounded keeps user-controlled identifiers in messages short.
func bounded(s string) string {
	return countkey.Truncate(s, 64)
}
