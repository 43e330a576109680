package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// Poison reasons: why a message was skipped. Values are metric labels.
const (
	ReasonMalformedJSON     = "malformed_json"
	ReasonUnrecognizedShape = "unrecognized_shape"
	ReasonInvalidEvent      = "invalid_event"
	ReasonEmptyEnvelope     = "empty_envelope"
)

// decoded is what one message holds.
type decoded struct {
	events []classify.Event
	// node and cluster from the message's JSON, "" when absent. They are
	// read only for messages with events: the others count nothing.
	node, cluster string
	// invalid counts events inside an otherwise usable message that were
	// not valid (an EventList item, an AKS record).
	invalid int
	// skipped counts events the pre-filter set aside undecoded: they
	// cannot count.
	skipped classify.Prefiltered
}

// decoder recognises the shapes shippers put audit events in.
type decoder struct {
	envelopeFields []string
	nodeField      []string
	clusterField   []string
	// prefilter sets aside, undecoded, events that cannot count; nil
	// decodes every event.
	prefilter *auditjson.Prefilter
	// unquoted holds *[]byte buffers for the events unescaped out of
	// string envelopes: partitions decode in parallel, and nothing
	// decoded keeps a reference into the buffer.
	unquoted *sync.Pool
}

func newDecoder(c Config, p *auditjson.Prefilter) *decoder {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ".")
	}
	return &decoder{envelopeFields: c.EnvelopeFields, nodeField: split(c.NodeField), clusterField: split(c.ClusterField), prefilter: p,
		unquoted: &sync.Pool{New: func() any { return new([]byte) }}}
}

// decode reads one message value. A non-empty reason means the message is
// poison: nothing in it can be counted.
//
// Shapes, in the order they are recognised:
//   - {"records":[{"category":"kube-audit","properties":{"log":"<event>"}}]} (AKS via Event Hubs)
//   - {"category":"kube-audit","properties":{"log":"<event>"}} (one AKS record)
//   - {"kind":"EventList",...} (a whole webhook batch)
//   - an Event, possibly with shipper fields (@timestamp, hostname, ...) beside its own
//   - {"log":"<event>"} or {"message":"<event>"}: the configured envelope fields
//
// An Event as kube-apiserver writes it starts with "kind":"Event": that
// first key is enough to tell its shape, and the message is then read at
// most once (not at all when the pre-filter sets it aside). Other shapes
// are told by a walk over the top-level keys that does not decode values.
func (d *decoder) decode(value []byte) (decoded, string) {
	top, null, ok := openTop(value)
	if !ok {
		if null {
			return decoded{}, ReasonUnrecognizedShape
		}
		return decoded{}, ReasonMalformedJSON
	}
	var shape struct{ records, properties, kind, stage span }
	var where fieldSpans
	var spans [4]span
	envelope := spans[:0]
	if len(d.envelopeFields) > len(spans) {
		envelope = make([]span, 0, len(d.envelopeFields))
	}
	envelope = envelope[:len(d.envelopeFields)]
	// The envelope field that comes first in the configuration is the one
	// read; it is unescaped as the walk steps over it, into buf.
	var buf *[]byte
	defer func() {
		if buf != nil {
			d.unquoted.Put(buf)
		}
	}()
	best := len(d.envelopeFields)
	var inner []byte
	var innerOK bool
	for key, esc, start, ok := top.nextKey(); ok; key, esc, start, ok = top.nextKey() {
		if esc {
			key = []byte(keyName(key, esc))
		}
		field := -1
		for i, f := range d.envelopeFields {
			if string(key) == f {
				field = i
				break
			}
		}
		var end int
		if field >= 0 && field <= best {
			if buf == nil {
				buf = d.unquoted.Get().(*[]byte)
			}
			best = field
			inner, end, innerOK = unquoteAt((*buf)[:0], value, start)
			if innerOK {
				*buf = inner[:0] // keep what it grew to
			}
		} else {
			end = skipValue(value, start)
		}
		if !top.valueEnds(end) {
			break
		}
		if top.keys == 1 && !esc && string(key) == "kind" && string(value[start:end]) == `"Event"` {
			// As kube-apiserver writes an Event: the first key tells.
			return d.event(value, value, true, nil)
		}
		sp := span{start, end}
		switch string(key) {
		case "records":
			shape.records = sp
		case "properties":
			shape.properties = sp
		case "kind":
			shape.kind = sp
		case "stage":
			shape.stage = sp
		}
		if field >= 0 {
			envelope[field] = sp
		}
		// Of repeated keys the last counts, as in stringAt.
		if len(d.nodeField) == 1 && string(key) == d.nodeField[0] {
			where.node = sp
		}
		if len(d.clusterField) == 1 && string(key) == d.clusterField[0] {
			where.cluster = sp
		}
	}
	if top.bad {
		return decoded{}, ReasonMalformedJSON
	}
	// The walk has seen every top-level key: no second walk for the node
	// and cluster fields when they are top-level ones.
	var at *fieldSpans
	if len(d.nodeField) <= 1 && len(d.clusterField) <= 1 {
		at = &where
	}
	switch {
	case shape.records.end != 0:
		out, ok := d.aksRecords(value, shape.records.start)
		if !ok {
			var recs []aksRecord
			if err := json.Unmarshal(shape.records.of(value), &recs); err != nil {
				return decoded{}, ReasonUnrecognizedShape
			}
			out = decoded{}
			for _, r := range recs {
				d.addAKS(&out, r)
			}
		}
		return d.checked(value, out, emptyReason(out), at)
	case shape.properties.end != 0:
		var r aksRecord
		if err := json.Unmarshal(value, &r); err != nil || r.Properties.Log == "" {
			return decoded{}, ReasonUnrecognizedShape
		}
		var out decoded
		d.addAKS(&out, r)
		return d.checked(value, out, emptyReason(out), at)
	case shape.kind.end != 0 && stringValue(shape.kind.of(value)) == auditjson.KindEventList:
		events, bad, skipped, err := auditjson.DecodeBodyFiltered(value, d.prefilter)
		if err != nil {
			return decoded{}, ReasonInvalidEvent
		}
		return d.checked(value, decoded{events: events, invalid: bad.Count, skipped: skipped}, "", at)
	case shape.stage.end != 0:
		return d.event(value, value, true, at)
	}
	if best < len(d.envelopeFields) {
		return d.enveloped(value, envelope[best].of(value), inner, innerOK, at)
	}
	return decoded{}, ReasonUnrecognizedShape
}

// enveloped reads the event that the string envelope field quoted holds:
// inner, unescaped already when ok.
func (d *decoder) enveloped(value, quoted, inner []byte, ok bool, at *fieldSpans) (decoded, string) {
	if !ok {
		// Rare: let encoding/json decide, with its error or its U+FFFD.
		var s string
		if err := json.Unmarshal(quoted, &s); err != nil {
			return decoded{}, ReasonUnrecognizedShape
		}
		inner = []byte(s)
	}
	inner = bytes.TrimSpace(inner)
	if len(inner) == 0 {
		return decoded{}, ReasonEmptyEnvelope
	}
	return d.event(value, inner, false, at)
}

// event reads the one event raw that value holds: value itself when whole,
// else from an envelope.
func (d *decoder) event(value, raw []byte, whole bool, at *fieldSpans) (decoded, string) {
	var out decoded
	if r, skip := d.prefilter.Skip(raw); skip {
		out.skipped.Add(r)
		// Whose event it was, for the clusters-without-reads warning.
		return d.located(value, out, at), ""
	}
	ev, err := auditjson.DecodeEvent(raw)
	if err != nil {
		var e *auditjson.Error
		if whole && errors.As(err, &e) && e.Reason == auditjson.ReasonMalformedJSON {
			return decoded{}, ReasonMalformedJSON
		}
		return decoded{}, ReasonInvalidEvent
	}
	out.events = []classify.Event{ev}
	if whole {
		// Decoding it has validated the whole message.
		return d.located(value, out, at), ""
	}
	return d.checked(value, out, "", at)
}

// checked completes a message whose events came out of part of it: one
// with events to count must be valid JSON as a whole, as encoding/json
// would have it, and then says where it came from.
func (d *decoder) checked(value []byte, out decoded, reason string, at *fieldSpans) (decoded, string) {
	if reason != "" || len(out.events) == 0 {
		if reason == "" && out.skipped != (classify.Prefiltered{}) {
			return d.located(value, out, at), ""
		}
		return out, reason
	}
	if !json.Valid(value) {
		return decoded{}, ReasonMalformedJSON
	}
	return d.located(value, out, at), ""
}

// fieldSpans is where a message's node and cluster fields lie, as the
// shape walk found them; an end of 0 is a field the message lacks.
type fieldSpans struct{ node, cluster span }

// located reads the node and cluster fields of a message with events,
// from at when the shape walk found them.
func (d *decoder) located(value []byte, out decoded, at *fieldSpans) decoded {
	switch {
	case at != nil:
		out.node, out.cluster = spanString(value, at.node), spanString(value, at.cluster)
	case len(d.nodeField) == 1 && len(d.clusterField) == 1:
		// The usual case, two top-level fields: one walk finds both.
		out.node, out.cluster = topStrings(value, d.nodeField[0], d.clusterField[0])
	case len(d.nodeField) > 0 || len(d.clusterField) > 0:
		out.node, out.cluster = stringAt(value, d.nodeField), stringAt(value, d.clusterField)
	}
	// The aggregator keeps no more than these; a longer name, the
	// shipper's or a sender's, is not held past the message.
	out.node, out.cluster = cut(out.node, countkey.MaxNodeBytes), cut(out.cluster, countkey.MaxClusterBytes)
	return out
}

// cut is countkey.Truncate into a string of its own, so that a long
// value's bytes are not kept alive by the part kept.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.Clone(countkey.Truncate(s, n))
}

// span is where a value lies in a message; end is 0 when it is absent.
type span struct{ start, end int }

func (s span) of(b []byte) []byte { return b[s.start:s.end] }

// spanString is the string value at s in value, or "".
func spanString(value []byte, s span) string {
	if s.end == 0 {
		return ""
	}
	return stringValue(s.of(value))
}

// topStrings is stringAt of two top-level keys, a and b, in one walk.
func topStrings(value []byte, a, b string) (string, string) {
	top, _, ok := openTop(value)
	if !ok {
		return "", ""
	}
	var at fieldSpans
	for key, esc, start, end, ok := top.next(); ok; key, esc, start, end, ok = top.next() {
		if esc {
			key = []byte(keyName(key, esc))
		}
		if string(key) == a {
			at.node = span{start, end}
		}
		if string(key) == b {
			at.cluster = span{start, end}
		}
	}
	return spanString(value, at.node), spanString(value, at.cluster)
}

// stringValue is the JSON string raw holds, or "" when it holds another
// value.
func stringValue(raw []byte) string {
	// As encoding/json into a string, without its reflection: a string
	// as it decodes, "" for null or any other value.
	s, end := auditjson.StringAt(raw, 0)
	if end != len(raw) {
		return ""
	}
	return s
}

func emptyReason(d decoded) string {
	if len(d.events) == 0 && d.invalid > 0 {
		return ReasonInvalidEvent
	}
	return ""
}

// stringAt follows a path of object keys from the top of a message and
// returns the string there, or "". Of repeated keys the last one counts,
// as with encoding/json.
func stringAt(value []byte, path []string) string {
	if len(path) == 0 {
		return ""
	}
	top, _, ok := openTop(value)
	if !ok {
		return ""
	}
	var found span
	for key, esc, start, end, ok := top.next(); ok; key, esc, start, end, ok = top.next() {
		if esc {
			key = []byte(keyName(key, esc))
		}
		if string(key) == path[0] {
			found = span{start, end}
		}
	}
	if found.end == 0 {
		return ""
	}
	if len(path) == 1 {
		return stringValue(found.of(value))
	}
	var next map[string]json.RawMessage
	if json.Unmarshal(found.of(value), &next) != nil {
		return ""
	}
	for _, key := range path[1 : len(path)-1] {
		raw := next[key]
		next = nil
		if json.Unmarshal(raw, &next) != nil {
			return ""
		}
	}
	return stringValue(next[path[len(path)-1]])
}

// keyName is a key's value from its raw bytes.
func keyName(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	// Rare: the key is what encoding/json makes of it.
	var name string
	if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &name) != nil {
		return ""
	}
	return name
}

var errNoBrokers = errors.New("kafka: no broker reachable")
