package auditjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Timestamp fields of an event that say when the request happened.
const (
	fieldRequestReceived = "requestReceivedTimestamp"
	fieldStage           = "stageTimestamp"
	fieldAuditID         = "auditID"
	fieldIdentity        = "sunsetIdentityTimestamp"
)

// Shift returns the audit event raw with its requestReceivedTimestamp and
// stageTimestamp moved by d, and everything else as it was. It is how a
// captured log is replayed as if it had just happened.
//
// The event keeps its identity: the auditID stays, and an event without one
// gets the digest of raw as its auditID, the ID it would have been
// deduplicated by; the original requestReceivedTimestamp, which the
// identity is also made of, goes into sunsetIdentityTimestamp, unless an
// earlier shift put one there. A shifted event is therefore still a
// duplicate of the same event sent unshifted, in either order.
func Shift(raw []byte, d time.Duration) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, syntaxError("event", err)
	}
	if _, ok := fields[fieldIdentity]; !ok {
		if v, ok := fields[fieldRequestReceived]; ok {
			fields[fieldIdentity] = v
		}
	}
	for _, key := range []string{fieldRequestReceived, fieldStage} {
		v, ok := fields[key]
		if !ok {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, &Error{ReasonBadTimestamp, key + " is not a string"}
		}
		t, err := parseTime(s)
		if err != nil {
			return nil, &Error{ReasonBadTimestamp, key + " is not an RFC 3339 time"}
		}
		if t.IsZero() {
			continue
		}
		fields[key], _ = json.Marshal(t.Add(d).UTC().Format(time.RFC3339Nano))
	}
	var id string
	if v, ok := fields[fieldAuditID]; ok {
		_ = json.Unmarshal(v, &id)
	}
	if id == "" {
		fields[fieldAuditID], _ = json.Marshal(digestID(raw))
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	// Leave every other value byte for byte as it was.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return nil, fmt.Errorf("auditjson: encoding a shifted event: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
