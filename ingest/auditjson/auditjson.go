// Package auditjson decodes audit.k8s.io/v1 JSON, an EventList or a single
// Event, into aggregate events.
//
// It extracts only the fields Sunset counts by. Request and response objects
// are skipped by the decoder and never kept, and error messages never quote
// event content: audit events can hold secrets.
package auditjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
)

// The only audit API version Sunset accepts; kube-apiserver has sent nothing
// else since 1.24.
const (
	APIVersion    = "audit.k8s.io/v1"
	KindEventList = "EventList"
	KindEvent     = "Event"
)

// Annotation keys set by kube-apiserver on deprecated requests.
const (
	AnnotationDeprecated     = "k8s.io/deprecated"
	AnnotationRemovedRelease = "k8s.io/removed-release"
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

// objectOrNull reports whether the JSON value raw, without space before it,
// may decode to an event: encoding/json refuses any other value for a
// struct.
func objectOrNull(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '{' || raw[0] == 'n')
}

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

// maxFastItems is the most items a list may have to be decoded in one pass
// (see decodeBody); kube-apiserver sends at most 400.
const maxFastItems = 1024

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
	event(raw []byte) (aggregate.Event, error)
}

func (w *wireEvent) event(raw []byte) (aggregate.Event, error) { return convert(w, raw) }

// errNeedRaw means an event can only be converted with its raw bytes at hand.
var errNeedRaw = errors.New("auditjson: event needs its raw bytes")

// DecodeBody decodes a whole body: an EventList or one Event. A non-nil error
// means the body as a whole is unusable (*Error). Otherwise the good events
// are returned, and the malformed items of a list are tallied in bad.
func DecodeBody(body []byte) (events []aggregate.Event, bad Invalid, err error) {
	// A batch without admission webhook annotations (one memory scan
	// tells) decodes exactly as if the admission counter did not exist.
	if admission.MayHave(body) {
		return decodeBody[wireEventWithAdmission](body)
	}
	return decodeBody[wireEvent](body)
}

func decodeBody[T any, P interface {
	*T
	wireItem
}](body []byte) (events []aggregate.Event, bad Invalid, err error) {
	// The envelope first, its items left as bytes: nothing is allocated
	// per item until the items are known to be few and all objects. A
	// plain list is walked by the scanner; anything else is read by
	// encoding/json.
	items, n, objects, ok := plainList(body)
	if !ok {
		var env envelope
		if err := json.Unmarshal(body, &env); err != nil {
			e := syntaxError("body", err)
			e.Reason = ReasonMalformedJSON
			return nil, Invalid{}, e
		}
		if err := envelopeError(env.Kind, env.APIVersion); err != nil {
			return nil, Invalid{}, err
		}
		if env.Kind == KindEvent {
			ev, err := DecodeEvent(body)
			if err != nil {
				return nil, Invalid{}, err
			}
			return []aggregate.Event{ev}, Invalid{}, nil
		}
		if items = env.Items.raw; items == nil {
			return []aggregate.Event{}, Invalid{}, nil
		}
		if n, objects = countItems(items); n < 0 {
			// encoding/json has validated it; should the scanner
			// differ, encoding/json has the last word.
			return decodeRawItems[T, P](items)
		}
	}
	if n > maxFastItems || !objects {
		// Item by item, so that junk costs a count, not a decoded
		// event each.
		return decodeItems[T, P](items)
	}
	// Fast path: one pass over a well-formed list. Anything unusual (a type
	// error somewhere, an item without auditID) takes the item-by-item path,
	// which can isolate bad items.
	var list []T
	if json.Unmarshal(items, &list) != nil {
		return decodeItems[T, P](items)
	}
	events = make([]aggregate.Event, 0, len(list))
	for i := range list {
		ev, err := P(&list[i]).event(nil)
		if errors.Is(err, errNeedRaw) {
			return decodeItems[T, P](items)
		}
		var itemErr *Error
		if errors.As(err, &itemErr) {
			bad.add(i, itemErr)
			continue
		}
		if err != nil {
			return nil, Invalid{}, err
		}
		// The decoded list shares its request objects with body.
		ev.RequestObject = bytes.Clone(ev.RequestObject)
		events = append(events, ev)
	}
	return events, bad, nil
}

// plainList finds the items of body when it is a plain EventList of
// audit.k8s.io/v1, as decodeListFiltered reads one: valid JSON, the three
// envelope keys once each and spelt exactly, items an array. It says how
// many items there are, and whether all are objects or null.
func plainList(body []byte) (items []byte, n int, objects, ok bool) {
	var list span
	if !plainEnvelope(body, func(start int) int {
		list = span{start, skipArray(body, start, 2)}
		return list.end
	}) {
		return nil, 0, false, false
	}
	items = list.of(body)
	n, objects = countItems(items)
	return items, n, objects, n >= 0
}

// countItems counts the items of the JSON array items, and says whether
// all are objects or null; n is -1 when the scanner cannot walk it.
func countItems(items []byte) (n int, objects bool) {
	objects = true
	if scanArray(items, 0, 2, func(start int) int {
		n++
		objects = objects && objectOrNull(items[start:])
		return skipValue(items, start, 2)
	}) < 0 {
		return -1, false
	}
	return n, objects
}

// decodeItems decodes the items of a list, the JSON array items (valid
// already), one by one. Items that are not objects are only counted.
func decodeItems[T any, P interface {
	*T
	wireItem
}](items []byte) (events []aggregate.Event, bad Invalid, err error) {
	events = []aggregate.Event{}
	index := 0
	end := scanArray(items, 0, 2, func(start int) int {
		end := skipValue(items, start, 2)
		if end < 0 {
			return -1
		}
		raw := items[start:end]
		if !objectOrNull(raw) {
			bad.addNonObject(index, raw)
		} else if ev, err := decodeEvent[T, P](raw); err != nil {
			var e *Error
			errors.As(err, &e)
			bad.add(index, e)
		} else {
			events = append(events, ev)
		}
		index++
		return end
	})
	if end < 0 {
		return decodeRawItems[T, P](items)
	}
	return events, bad, nil
}

// decodeRawItems is decodeItems by encoding/json alone, for an array the
// scanner would not walk.
func decodeRawItems[T any, P interface {
	*T
	wireItem
}](items []byte) (events []aggregate.Event, bad Invalid, err error) {
	var list []json.RawMessage
	if err := json.Unmarshal(items, &list); err != nil {
		e := syntaxError("body", err)
		e.Reason = ReasonMalformedJSON
		return nil, Invalid{}, e
	}
	events = make([]aggregate.Event, 0, len(list))
	for i, raw := range list {
		ev, err := decodeEvent[T, P](raw)
		if err != nil {
			var e *Error
			errors.As(err, &e)
			bad.add(i, e)
			continue
		}
		events = append(events, ev)
	}
	return events, bad, nil
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

// DecodeEvent decodes one audit event. The error, if any, is an *Error.
func DecodeEvent(raw []byte) (aggregate.Event, error) {
	ev, err := decodeInPlace(raw)
	ev.RequestObject = bytes.Clone(ev.RequestObject)
	return ev, err
}

// decodeInPlace is DecodeEvent with the event's RequestObject still a part
// of raw: the caller copies it, if it keeps it at all.
func decodeInPlace(raw []byte) (aggregate.Event, error) {
	if admission.MayHave(raw) {
		return decodeEventInPlace[wireEventWithAdmission](raw)
	}
	var w wireEvent
	if decodeWire(raw, &w) {
		return convert(&w, raw)
	}
	return decodeEventInPlace[wireEvent](raw)
}

func decodeEvent[T any, P interface {
	*T
	wireItem
}](raw []byte) (aggregate.Event, error) {
	ev, err := decodeEventInPlace[T, P](raw)
	ev.RequestObject = bytes.Clone(ev.RequestObject)
	return ev, err
}

func decodeEventInPlace[T any, P interface {
	*T
	wireItem
}](raw []byte) (aggregate.Event, error) {
	var w T
	if err := json.Unmarshal(raw, &w); err != nil {
		return aggregate.Event{}, syntaxError("event", err)
	}
	return P(&w).event(raw)
}

// APIVersionV1beta1 is the audit version of apiservers before 1.24. Its
// Event has every field Sunset reads under the same names, so single events
// (log lines, list items) in v1beta1 are read as v1. Whole webhook bodies
// must still be v1: kube-apiserver sends nothing else today.
const APIVersionV1beta1 = "audit.k8s.io/v1beta1"

// convert checks a decoded event and keeps what Sunset counts by. raw may be
// nil when the event has an auditID; without one, its digest is the ID.
func convert(w *wireEvent, raw []byte) (aggregate.Event, error) {
	// Items of an EventList carry no kind or apiVersion; a standalone event
	// (a log line, a Kafka message) does.
	if v := w.APIVersion.s; v != "" && v != APIVersion && v != APIVersionV1beta1 {
		return aggregate.Event{}, &Error{ReasonWrongAPIVersion, fmt.Sprintf("event apiVersion %q is not supported; want %q or %q", bounded(v), APIVersion, APIVersionV1beta1)}
	}
	if k := w.Kind.s; k != "" && k != KindEvent {
		return aggregate.Event{}, &Error{ReasonWrongKind, fmt.Sprintf("event kind %q is not supported; want %q", bounded(k), KindEvent)}
	}
	if w.Stage.s == "" {
		return aggregate.Event{}, &Error{ReasonMissingStage, "event has no stage"}
	}
	// A request made as another user counts under that user, with that
	// user's pod-bound token claims; the real caller is kept beside it.
	as, impersonatedBy := &w.User, ""
	if w.ImpersonatedUser != nil && w.ImpersonatedUser.Username.s != "" {
		as, impersonatedBy = w.ImpersonatedUser, w.User.Username.s
	}
	ev := aggregate.Event{
		ID:             w.AuditID.s,
		Stage:          w.Stage.s,
		Verb:           w.Verb.s,
		Username:       as.Username.s,
		ImpersonatedBy: impersonatedBy,
		UserAgent:      w.UserAgent.s,
		PodName:        as.Extra.PodName.s,
		PodNode:        as.Extra.NodeName.s,
		SourceIPs:      w.SourceIPs.ips,
		RequestObject:  w.RequestObject,
		Dropped:        w.Annotations.dropped,
	}
	if w.SourceIPs.invalid {
		ev.Dropped |= aggregate.DroppedSourceIP
	}
	if w.SourceIPs.cut || w.Stage.cut || w.Verb.cut || as.Username.cut || impersonatedBy != "" && w.User.Username.cut ||
		w.UserAgent.cut || as.Extra.PodName.cut || as.Extra.NodeName.cut || w.RequestURI.cut {
		ev.Dropped |= aggregate.DroppedOverBound
	}
	ev.DryRun = dryRun(boundedURI(w.RequestURI), ev.Verb, w.RequestObject)
	if ev.ID == "" {
		if raw == nil {
			return aggregate.Event{}, errNeedRaw
		}
		// Re-sent events are byte-identical, so a digest deduplicates them.
		ev.ID = digestID(raw)
	}
	if w.ObjectRef != nil {
		// A part cut at its bound is still longer than the aggregator
		// allows, which refuses it (too_long).
		ev.ObjectRef = &aggregate.ObjectRef{
			Group:       w.ObjectRef.APIGroup.s,
			Version:     w.ObjectRef.APIVersion.s,
			Resource:    w.ObjectRef.Resource.s,
			Subresource: w.ObjectRef.Subresource.s,
		}
	}
	if w.ResponseStatus != nil {
		ev.ResponseCode = w.ResponseStatus.Code
	}
	ev.Deprecated = w.Annotations.deprecated
	ev.RemovedRelease = w.Annotations.removedRelease
	var err error
	if ev.RequestReceived, err = parseBoundedTime(w.RequestReceivedTimestamp); err != nil {
		return aggregate.Event{}, &Error{ReasonBadTimestamp, "requestReceivedTimestamp is not an RFC 3339 time"}
	}
	if ev.StageTime, err = parseBoundedTime(w.StageTimestamp); err != nil {
		return aggregate.Event{}, &Error{ReasonBadTimestamp, "stageTimestamp is not an RFC 3339 time"}
	}
	if ev.IdentityTime, err = parseBoundedTime(w.IdentityTimestamp); err != nil {
		return aggregate.Event{}, &Error{ReasonBadTimestamp, fieldIdentity + " is not an RFC 3339 time"}
	}
	return ev, nil
}

// digestID identifies an event without auditID by its bytes.
func digestID(raw []byte) string {
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// dryRun reports a server-side dry run: dryRun=All in the request URI, or,
// for a DELETE logged at Request level or above, in its DeleteOptions body.
// A dry-run DELETE logged at Metadata level looks like a real one.
func dryRun(uri, verb string, requestObject []byte) bool {
	if _, query, ok := strings.Cut(uri, "?"); ok && strings.Contains(query, "dryRun") {
		if v, err := url.ParseQuery(query); err == nil && slices.Contains(v["dryRun"], "All") {
			return true
		}
	}
	if verb == "delete" && len(requestObject) > 0 {
		// dryRun is read without being kept: a sender may list
		// millions of values.
		var opts struct {
			Kind   string    `json:"kind"`
			DryRun dryRunAll `json:"dryRun"`
		}
		if json.Unmarshal(requestObject, &opts) == nil && opts.Kind == "DeleteOptions" && bool(opts.DryRun) {
			return true
		}
	}
	return false
}

// errLongTime is a timestamp over its bound, which no RFC 3339 time an
// apiserver writes is.
var errLongTime = errors.New("auditjson: timestamp over its bound")

func parseBoundedTime(t text[timeLimit]) (time.Time, error) {
	if t.cut {
		return time.Time{}, errLongTime
	}
	return parseTime(t.s)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
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
	return aggregate.Truncate(s, 64)
}
