package kafka

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/kube-sunset/sunset/aggregate"
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
	events []aggregate.Event
	// node and cluster from the message's JSON, "" when absent.
	node, cluster string
	// invalid counts events inside an otherwise usable message that were
	// not valid (an EventList item, an AKS record).
	invalid int
}

// decoder recognises the shapes shippers put audit events in.
type decoder struct {
	envelopeFields []string
	nodeField      []string
	clusterField   []string
}

func newDecoder(c Config) *decoder {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ".")
	}
	return &decoder{envelopeFields: c.EnvelopeFields, nodeField: split(c.NodeField), clusterField: split(c.ClusterField)}
}

// aksRecord is one record of an Azure diagnostic-settings envelope.
type aksRecord struct {
	Category   string `json:"category"`
	Properties struct {
		Log string `json:"log"`
	} `json:"properties"`
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
func (d *decoder) decode(value []byte) (decoded, string) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(value, &top); err != nil {
		return decoded{}, ReasonMalformedJSON
	}
	out := decoded{node: stringAt(top, d.nodeField), cluster: stringAt(top, d.clusterField)}
	if raw, ok := top["records"]; ok {
		var recs []aksRecord
		if err := json.Unmarshal(raw, &recs); err != nil {
			return decoded{}, ReasonUnrecognizedShape
		}
		for _, r := range recs {
			d.addAKS(&out, r)
		}
		return out, emptyReason(out)
	}
	if _, ok := top["properties"]; ok {
		var r aksRecord
		if err := json.Unmarshal(value, &r); err != nil || r.Properties.Log == "" {
			return decoded{}, ReasonUnrecognizedShape
		}
		d.addAKS(&out, r)
		return out, emptyReason(out)
	}
	if kind := stringAt(top, []string{"kind"}); kind == auditjson.KindEventList {
		events, bad, err := auditjson.DecodeBody(value)
		if err != nil {
			return decoded{}, ReasonInvalidEvent
		}
		out.events, out.invalid = events, len(bad)
		return out, ""
	}
	if _, ok := top["stage"]; ok {
		ev, err := auditjson.DecodeEvent(value)
		if err != nil {
			return decoded{}, ReasonInvalidEvent
		}
		out.events = []aggregate.Event{ev}
		return out, ""
	}
	for _, f := range d.envelopeFields {
		raw, ok := top[f]
		if !ok {
			continue
		}
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return decoded{}, ReasonUnrecognizedShape
		}
		inner = strings.TrimSpace(inner)
		if inner == "" {
			return decoded{}, ReasonEmptyEnvelope
		}
		ev, err := auditjson.DecodeEvent([]byte(inner))
		if err != nil {
			return decoded{}, ReasonInvalidEvent
		}
		out.events = []aggregate.Event{ev}
		return out, ""
	}
	return decoded{}, ReasonUnrecognizedShape
}

// addAKS adds one AKS record's event; other categories (kube-apiserver
// logs, guard) share the stream and are not audit events.
func (d *decoder) addAKS(out *decoded, r aksRecord) {
	if r.Category != "" && r.Category != "kube-audit" && r.Category != "kube-audit-admin" {
		return
	}
	ev, err := auditjson.DecodeEvent([]byte(r.Properties.Log))
	if err != nil {
		out.invalid++
		return
	}
	out.events = append(out.events, ev)
}

func emptyReason(d decoded) string {
	if len(d.events) == 0 && d.invalid > 0 {
		return ReasonInvalidEvent
	}
	return ""
}

// stringAt follows a path of object keys and returns the string there, or "".
func stringAt(top map[string]json.RawMessage, path []string) string {
	if len(path) == 0 {
		return ""
	}
	raw, ok := top[path[0]]
	if !ok {
		return ""
	}
	if len(path) == 1 {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	var next map[string]json.RawMessage
	if json.Unmarshal(raw, &next) != nil {
		return ""
	}
	return stringAt(next, path[1:])
}

var errNoBrokers = errors.New("kafka: no broker reachable")
