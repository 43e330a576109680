// Package auditjson decodes audit.k8s.io/v1 JSON, an EventList or a single
// Event, into aggregate events.
//
// It extracts only the fields Sunset counts by. Request and response objects
// are skipped by the decoder and never kept, and error messages never quote
// event content: audit events can hold secrets.
package auditjson

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/classify"
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

// objectOrNull reports whether the JSON value raw, without space before it,
// may decode to an event: encoding/json refuses any other value for a
// struct.
func objectOrNull(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '{' || raw[0] == 'n')
}

// maxFastItems is the most items a list may have to be decoded in one pass
// (see decodeBody); kube-apiserver sends at most 400.
const maxFastItems = 1024

// errNeedRaw means an event can only be converted with its raw bytes at hand.
var errNeedRaw = errors.New("auditjson: event needs its raw bytes")

// DecodeBody decodes a whole body: an EventList or one Event. A non-nil error
// means the body as a whole is unusable (*Error). Otherwise the good events
// are returned, and the malformed items of a list are tallied in bad.
func DecodeBody(body []byte) (events []classify.Event, bad Invalid, err error) {
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
}](body []byte) (events []classify.Event, bad Invalid, err error) {
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
			return []classify.Event{ev}, Invalid{}, nil
		}
		if items = env.Items.raw; items == nil {
			return []classify.Event{}, Invalid{}, nil
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
	events = make([]classify.Event, 0, len(list))
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
}](items []byte) (events []classify.Event, bad Invalid, err error) {
	events = []classify.Event{}
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
}](items []byte) (events []classify.Event, bad Invalid, err error) {
	var list []json.RawMessage
	if err := json.Unmarshal(items, &list); err != nil {
		e := syntaxError("body", err)
		e.Reason = ReasonMalformedJSON
		return nil, Invalid{}, e
	}
	events = make([]classify.Event, 0, len(list))
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

// DecodeEvent decodes one audit event. The error, if any, is an *Error.
func DecodeEvent(raw []byte) (classify.Event, error) {
	ev, err := decodeInPlace(raw)
	ev.RequestObject = bytes.Clone(ev.RequestObject)
	return ev, err
}

// decodeInPlace is DecodeEvent with the event's RequestObject still a part
// of raw: the caller copies it, if it keeps it at all.
func decodeInPlace(raw []byte) (classify.Event, error) {
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
}](raw []byte) (classify.Event, error) {
	ev, err := decodeEventInPlace[T, P](raw)
	ev.RequestObject = bytes.Clone(ev.RequestObject)
	return ev, err
}

func decodeEventInPlace[T any, P interface {
	*T
	wireItem
}](raw []byte) (classify.Event, error) {
	var w T
	if err := json.Unmarshal(raw, &w); err != nil {
		return classify.Event{}, syntaxError("event", err)
	}
	return P(&w).event(raw)
}
