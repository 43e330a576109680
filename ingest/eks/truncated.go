package eks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// truncatedMarker ends a log event that CloudWatch cut at its size limit
// (256 KB for EKS' control-plane logs).
const truncatedMarker = "[Truncated...]"

// maxMessageBytes bounds the message decoded: CloudWatch's largest log
// event is 1 MiB, and an EKS audit event is cut at 256 KB. Anything larger
// did not come from EKS.
const maxMessageBytes = 1 << 20

// ReasonTooLarge is the reason given for a message over maxMessageBytes,
// beside auditjson's reasons for messages that are not audit events.
const ReasonTooLarge auditjson.Reason = "too_large"

// decodeMessage decodes one log event's message, an audit.k8s.io/v1 Event,
// and says whether CloudWatch had cut it. ts is the log event's time, in
// Unix milliseconds, which stands in for the event's own timestamps when
// the cut took them.
func decodeMessage(msg string, ts int64) (ev classify.Event, truncated bool, e *auditjson.Error) {
	if len(msg) > maxMessageBytes {
		return ev, false, &auditjson.Error{Reason: ReasonTooLarge, Message: fmt.Sprintf("message is %d bytes, over %d", len(msg), maxMessageBytes)}
	}
	raw := []byte(msg)
	if head, ok := strings.CutSuffix(strings.TrimRight(msg, " \t\r\n"), truncatedMarker); ok {
		truncated = true
		if raw, e = recoverTruncated(head, ts); e != nil {
			return ev, true, e
		}
	}
	return decodeRaw(raw, truncated)
}

func decodeRaw(raw []byte, truncated bool) (ev classify.Event, _ bool, e *auditjson.Error) {
	ev, err := auditjson.DecodeEvent(raw)
	if err != nil && !errors.As(err, &e) {
		e = &auditjson.Error{Reason: auditjson.ReasonMalformedEvent, Message: err.Error()}
	}
	return ev, truncated, e
}

// decode is decodeMessage behind the pre-filter: an event it sets aside
// is not decoded, and comes back nil with what the aggregator would have
// made of it, in aside. A cut event is pre-filtered as rebuilt, as the
// aggregator would judge it: without its annotations.
func (s *Source) decode(msg string, ts int64, aside *classify.Prefiltered) (*classify.Event, bool, *auditjson.Error) {
	if s.o.Prefilter == nil || len(msg) > maxMessageBytes {
		ev, truncated, bad := decodeMessage(msg, ts)
		return &ev, truncated, bad
	}
	raw, truncated := []byte(msg), false
	if head, ok := strings.CutSuffix(strings.TrimRight(msg, " \t\r\n"), truncatedMarker); ok {
		var bad *auditjson.Error
		truncated = true
		if raw, bad = recoverTruncated(head, ts); bad != nil {
			return nil, true, bad
		}
	}
	if why, skip := s.o.Prefilter.Skip(raw); skip {
		aside.Add(why)
		return nil, truncated, nil
	}
	ev, truncated, bad := decodeRaw(raw, truncated)
	return &ev, truncated, bad
}

// recoverTruncated rebuilds an event from the part CloudWatch kept. Its
// top-level fields come in the order of the audit Event type: kind,
// apiVersion, level, auditID, stage, requestURI, verb, user, sourceIPs,
// userAgent, objectRef and responseStatus, all small; then the request and
// response objects, which make an event large; then the timestamps and the
// annotations. So the cut usually falls in an object, and what counts a
// request survives but its time and k8s.io/deprecated do not. The complete
// fields are kept, in a new object that auditjson reads as any other
// event: the aggregator then judges the request by the catalog. Without a
// timestamp, the log event's time is written as its received and stage
// times, so that the request counts in the hour it was made rather than
// the one it was read in.
func recoverTruncated(head string, ts int64) ([]byte, *auditjson.Error) {
	dec := json.NewDecoder(strings.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, &auditjson.Error{Reason: auditjson.ReasonMalformedJSON, Message: "truncated message is not a JSON object"}
	}
	var b bytes.Buffer
	b.Grow(len(head))
	b.WriteByte('{')
	fields, timed := 0, false
	for {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			break
		}
		var value json.RawMessage
		if dec.Decode(&value) != nil {
			break
		}
		// A number or literal that runs to the cut may have lost digits
		// (404 cut to 40); objects, arrays and strings end in their own
		// delimiter.
		if dec.InputOffset() == int64(len(head)) && !strings.ContainsRune(`{["`, rune(value[0])) {
			break
		}
		if fields > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(value)
		fields++
		timed = timed || key == "requestReceivedTimestamp" || key == "stageTimestamp"
	}
	if !timed && ts > 0 {
		if fields > 0 {
			b.WriteByte(',')
		}
		// Both: the received time is also half of the request's identity,
		// which must be the same each time the entry is read.
		at := time.UnixMilli(ts).UTC().Format(time.RFC3339Nano)
		b.WriteString(`"requestReceivedTimestamp":"` + at + `","stageTimestamp":"` + at + `"`)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
