package classify

import (
	"strconv"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/countkey"
)

// fieldRuleID is the ID of rule's match of the event with the given ID.
func fieldRuleID(eventID, rule string) string { return eventID + countkey.FieldRuleIDSeparator + rule }

// RequestID is the identity of a request within its cluster: its auditID
// and its requestReceivedTimestamp. A retried batch repeats both, so it
// counts once; callers choose their own auditID (kube-apiserver copies
// the Audit-ID header), so two requests may share one, and they count
// apart as long as they were received at different instants. The time
// comes first, as decimal nanoseconds (empty when unknown) and a "/":
// its digits can never run into the auditID. An identity longer than
// countkey.MaxIDBytes (a long Audit-ID) is its digest, so that every mark,
// record and message key stays short.
func RequestID(auditID string, received time.Time) string {
	var b strings.Builder
	b.Grow(24 + len(auditID))
	if !received.IsZero() {
		b.WriteString(strconv.FormatInt(received.UnixNano(), 10))
	}
	b.WriteByte('/')
	b.WriteString(auditID)
	return countkey.MarkID(b.String())
}

// identity is e's RequestID: by the time a shifted replay kept
// (IdentityTime) where it is one a shift can have made, else by the
// received time.
func (e *Event) identity() string {
	if shiftedFrom(e.IdentityTime, e.RequestReceived) {
		return RequestID(e.ID, e.IdentityTime)
	}
	return RequestID(e.ID, e.RequestReceived)
}

// shiftedFrom reports whether received can be original moved later by
// whole hours, as a replay's shift moves it, from a time UnixNano holds
// (after 1970). Any other original is a sender's invention: honoured, it
// could pin many requests to one identity.
func shiftedFrom(original, received time.Time) bool {
	if original.IsZero() || original.Year() < 1970 || received.Before(original) {
		return false
	}
	return received.Sub(original)%time.Hour == 0
}
