package kafka

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/kube-sunset/sunset/internal/ingesttest"
)

// FuzzDecodeMessage gives the message decoder arbitrary values. Seeds are
// every shape shippers use (README, "Message shapes"), built around the
// captured events: a raw event line, an EventList, an event with shipper
// fields, the log and message string envelopes, an AKS envelope and one AKS
// record, and poison.
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
	for _, poison := range []string{"not json at all", `{"hello":"world"}`, `{"log":"  "}`, `{"log":"{\"stage\": 12}"}`, `{"records":5}`, `[]`, `null`} {
		f.Add([]byte(poison))
	}

	d := newDecoder(Config{EnvelopeFields: []string{"log", "message"}, NodeField: "hostname", ClusterField: "kubernetes.cluster"})
	reasons := []string{ReasonMalformedJSON, ReasonUnrecognizedShape, ReasonInvalidEvent, ReasonEmptyEnvelope}
	f.Fuzz(func(t *testing.T, value []byte) {
		out, reason := d.decode(value)
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
		if !json.Valid(value) {
			t.Fatalf("a message that is not JSON was decoded")
		}
		for i, ev := range out.events {
			if ev.Stage == "" || ev.ID == "" {
				t.Fatalf("event %d has no stage or ID: %+v", i, ev)
			}
		}
	})
}
