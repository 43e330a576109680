package kafka

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// FuzzDecodeMessage gives the message decoder arbitrary values and checks
// that exactly the same requests count as with every event decoded (no
// pre-filter) and as with the decoder that parsed each message whole before
// telling its shape (referenceDecode), and that what the pre-filter sets
// aside is tallied as Ingest would have. Seeds are every shape shippers use
// (README, "Message shapes"), built around the captured events: a raw event
// line, an EventList, an event with shipper fields, the log and message
// string envelopes, an AKS envelope and one AKS record, poison, and edge
// cases of the walk that tells shapes.
func FuzzDecodeMessage(f *testing.F) {
	quoted := func(b []byte) string {
		q, err := json.Marshal(string(b))
		if err != nil {
			f.Fatal(err)
		}
		return string(q)
	}
	aks, err := os.ReadFile("../../testdata/public/aks-diagnostic-envelope-kube-audit-deprecated.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(aks)
	f.Add([]byte(`{"records":[` + string(aks) + `,{"category":"kube-apiserver","properties":{"log":"I1121 not audit"}}]}`))
	for i, line := range ingesttest.CapturedLines(f, "../../testdata") {
		if i%3 != 0 {
			continue // a third of the lines per shape is plenty
		}
		f.Add(line)
		f.Add([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + string(line) + `]}`))
		if len(line) > 1 && line[0] == '{' {
			f.Add([]byte(`{"@timestamp":"2026-11-21T19:10:00.1Z","hostname":"master-f","log_type":"audit","kubernetes":{"cluster":"prod"},` + string(line[1:])))
		}
		f.Add([]byte(`{"log":` + quoted(append(line, '\n')) + `,"stream":"stdout","time":"2026-11-21T19:10:00Z"}`))
		f.Add([]byte(`{"message":` + quoted(line) + `,"host":"master-v","source_type":"file"}`))
		f.Add([]byte(`{"category":"kube-audit","properties":{"log":` + quoted(line) + `}}`))
	}
	// Hostile lengths, as each shape carries them.
	for _, ev := range ingesttest.HostileEvents() {
		f.Add([]byte(ev))
		f.Add([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + ev + `,` + ev + `]}`))
		f.Add([]byte(`{"log":` + quoted([]byte(ev)) + `,"hostname":"` + strings.Repeat("h", 1000) + `"}`))
		f.Add([]byte(`{"records":[{"category":"kube-audit","properties":{"log":` + quoted([]byte(ev)) + `}}]}`))
	}
	for _, poison := range []string{"not json at all", `{"hello":"world"}`, `{"log":"  "}`, `{"log":"{\"stage\": 12}"}`, `{"records":5}`, `[]`, `null`} {
		f.Add([]byte(poison))
	}

	for _, edge := range []string{
		// Escaped and repeated keys, key-like strings in values, odd
		// spacing, trailing garbage, truncation.
		`{"\u006bind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`,
		`{"l\u006fg":"{\"kind\":\"Event\",\"stage\":\"ResponseComplete\",\"auditID\":\"x\"}"}`,
		`{"kind":"Event","kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`,
		`{"hostname":"a\"stage\":\"b","log":"{}"}`,
		` { "kind" : "Event" , "stage" : "ResponseComplete" , "auditID" : "s" } `,
		`{"kind":"Event","stage":"ResponseComplete","auditID":"t"} x`,
		`{"kind":"Event","stage":"ResponseComplete","auditID":"t"`,
		`{"message":"{\"stage\":\"ResponseComplete\"}", "x": tru}`,
		`{"records":[{"category":"kube-audit","properties":{"log":"{\"stage\":\"RequestReceived\",\"auditID\":\"r\"}"}}]}`,
		// The AKS records' own walk: nulls, other types, folded, escaped
		// and repeated keys, another category, an escaped category.
		`{"records":[null,{"category":"kube-audit","properties":{"log":"{\"stage\":\"RequestReceived\",\"auditID\":\"r\"}"}}]}`,
		`{"records":[{"Category":"kube-audit","Properties":{"LOG":"{\"stage\":\"RequestReceived\",\"auditID\":\"r\"}"}}]}`,
		`{"records":[{"category":"guard","properties":{"log":"{\"stage\":\"RequestReceived\",\"auditID\":\"r\"}"}}]}`,
		`{"records":[{"category":"kube\u002daudit","properties":{"log":"{}","log":"{\"stage\":\"RequestReceived\",\"auditID\":\"r\"}"}}]}`,
		`{"records":[{"category":"kube-audit","properties":{"log":null}},{"category":7}]}`,
		`{"records":[{"category":"kube-audit","properties":{"log":"\ud800"},"properties":{}}]}`,
		`{}`, `{"a":}`, `{"a":1,}`, `"kind"`, `12`,
	} {
		f.Add([]byte(edge))
	}

	cfg := Config{EnvelopeFields: []string{"log", "message"}, NodeField: "hostname", ClusterField: "kubernetes.cluster"}
	agg := aggregate.New(aggregate.Options{Logger: zerolog.Nop(), Retention: 100 * 365 * 24 * time.Hour,
		Now: func() time.Time { return time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC) }})
	d := newDecoder(cfg, auditjson.NewPrefilter(agg.Interest()))
	unfiltered := newDecoder(cfg, nil)
	reasons := []string{ReasonMalformedJSON, ReasonUnrecognizedShape, ReasonInvalidEvent, ReasonEmptyEnvelope}
	counted := func(out decoded) []countkey.Request {
		reqs, _ := agg.Classify(classify.Origin{Source: Source, Node: out.node, Cluster: out.cluster}, out.events)
		return reqs
	}
	// Top-level node and cluster fields, which the shape walk finds on its
	// way instead of walking the message again.
	flatCfg := Config{EnvelopeFields: []string{"log", "message"}, NodeField: "hostname", ClusterField: "cluster"}
	flat, flatRef := newDecoder(flatCfg, auditjson.NewPrefilter(agg.Interest())), newDecoder(flatCfg, nil)
	f.Fuzz(func(t *testing.T, value []byte) {
		flatOut, flatReason := flat.decode(value)
		ref, refReason := referenceDecode(flatRef, value)
		if got, want := counted(flatOut), counted(ref); !reflect.DeepEqual(got, want) {
			t.Fatalf("with top-level fields counts %+v (%q), the reference decoder %+v (%q)", got, flatReason, want, refReason)
		}
		out, reason := d.decode(value)
		// The same requests count as with every event decoded, and as
		// with the decoder that parsed every message whole first.
		all, allReason := unfiltered.decode(value)
		ref, refReason = referenceDecode(unfiltered, value)
		if got, want := counted(out), counted(ref); !reflect.DeepEqual(got, want) {
			t.Fatalf("counts %+v (%q), the reference decoder %+v (%q)", got, reason, want, refReason)
		}
		if got, want := counted(all), counted(ref); !reflect.DeepEqual(got, want) {
			t.Fatalf("without the pre-filter counts %+v (%q), the reference decoder %+v (%q)", got, allReason, want, refReason)
		}
		if reason != "" {
			if !slices.Contains(reasons, reason) {
				t.Fatalf("poison reason %q is none of %v", reason, reasons)
			}
			// Invalid items of a poison message are not counted apart:
			// the message as a whole is poison.
			if len(out.events) > 0 {
				t.Fatalf("poison (%s) with %d events", reason, len(out.events))
			}
			return
		}
		if len(out.events) > 0 && !json.Valid(value) {
			t.Fatalf("a message that is not JSON was decoded")
		}
		for i, ev := range out.events {
			if ev.Stage == "" || ev.ID == "" {
				t.Fatalf("event %d has no stage or ID: %+v", i, ev)
			}
			ingesttest.CheckBounds(t, ev)
		}
		if len(out.node) > countkey.MaxNodeBytes || len(out.cluster) > countkey.MaxClusterBytes {
			t.Fatalf("node of %d bytes, cluster of %d", len(out.node), len(out.cluster))
		}
		// What the pre-filter set aside is what Ingest would have made of
		// those events. (An item that encoding/json rejects for a type
		// error may be set aside as skipped rather than invalid: neither
		// counts.)
		if allReason == "" && out.invalid == all.invalid {
			_, sum := agg.Classify(classify.Origin{Source: Source}, out.events)
			_, want := agg.Classify(classify.Origin{Source: Source}, all.events)
			sum.AddPrefiltered(out.skipped)
			if !reflect.DeepEqual(sum.SkippedBy, want.SkippedBy) {
				t.Fatalf("skipped %v with the pre-filter, %v without", sum.SkippedBy, want.SkippedBy)
			}
		}
	})
}

// referenceDecode is the decoder as it was before shapes were told by a
// walk: the message parsed into a map of raw values first, then the event.
// The one intended difference: a message whose first key is "kind":"Event"
// is an Event, whatever keys follow.
func referenceDecode(d *decoder, value []byte) (decoded, string) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(value, &top); err != nil {
		return decoded{}, ReasonMalformedJSON
	}
	at := func(path []string) string {
		if len(path) == 0 {
			return ""
		}
		m := top
		for _, k := range path[:len(path)-1] {
			var next map[string]json.RawMessage
			if json.Unmarshal(m[k], &next) != nil {
				return ""
			}
			m = next
		}
		return stringValue(m[path[len(path)-1]])
	}
	if first, _, ok := openTop(value); ok {
		if key, esc, start, end, ok := first.next(); ok && !esc && string(key) == "kind" && string(value[start:end]) == `"Event"` {
			ev, err := auditjson.DecodeEvent(value)
			if err != nil {
				return decoded{}, ReasonInvalidEvent
			}
			return decoded{events: []classify.Event{ev}, node: at(d.nodeField), cluster: at(d.clusterField)}, ""
		}
	}
	out := decoded{node: at(d.nodeField), cluster: at(d.clusterField)}
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
	if stringValue(top["kind"]) == auditjson.KindEventList {
		events, bad, err := auditjson.DecodeBody(value)
		if err != nil {
			return decoded{}, ReasonInvalidEvent
		}
		out.events, out.invalid = events, bad.Count
		return out, ""
	}
	if _, ok := top["stage"]; ok {
		ev, err := auditjson.DecodeEvent(value)
		if err != nil {
			return decoded{}, ReasonInvalidEvent
		}
		out.events = []classify.Event{ev}
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
		out.events = []classify.Event{ev}
		return out, ""
	}
	return decoded{}, ReasonUnrecognizedShape
}
