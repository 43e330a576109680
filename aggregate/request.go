package aggregate

import (
	"strconv"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// Request is one request that counts, as Classify returns it and Apply
// commits it: a request to a deprecated or removed API, or, with FieldRule
// set, a request that set a deprecated field.
type Request struct {
	// ID identifies the request within its cluster for deduplication: the
	// event's identity (RequestID), followed for a field rule's match by
	// the rule's name, so that each rule counts a request once.
	ID string
	// LegacyID is the ID older versions gave the request, the auditID
	// alone, so that the store still recognises a request it counted
	// before it was upgraded (store.Request.LegacyID). Empty for requests
	// that did not come from an event here.
	LegacyID string
	// Key is where the request is counted. A field rule's match is
	// counted under its rule: Key.API is empty.
	Key countkey.CountKey
	// FieldRule names the field rule whose match this is; empty for a
	// request to an API.
	FieldRule      string
	RemovedRelease string
	// Seen, if set, records the pod and addresses behind the request.
	Seen *countkey.Sighting
}

// fieldRuleIDSeparator joins an event's ID and a field rule's name into
// the ID of the rule's match: the dedupe marks of stored matches hold it.
const fieldRuleIDSeparator = "#field:"

// fieldRuleID is the ID of rule's match of the event with the given ID.
func fieldRuleID(eventID, rule string) string { return eventID + fieldRuleIDSeparator + rule }

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

// EventID is the ID of the event the request came from: ID without a
// field rule's name.
func (r Request) EventID() string {
	if r.FieldRule == "" {
		return r.ID
	}
	return strings.TrimSuffix(r.ID, fieldRuleIDSeparator+r.FieldRule)
}

// batch sorts reqs into the store's requests to APIs and to field rules.
func batch(reqs []Request, cursors []countkey.Cursor) store.Batch {
	b := store.Batch{Requests: make([]store.Request, 0, len(reqs))}
	for _, r := range reqs {
		if r.FieldRule == "" {
			b.Requests = append(b.Requests, store.Request{ID: r.ID, LegacyID: r.LegacyID, Key: r.Key, RemovedRelease: r.RemovedRelease, Seen: r.Seen})
			continue
		}
		k := r.Key
		b.FieldRules = append(b.FieldRules, store.FieldRuleRequest{ID: r.ID, LegacyID: r.LegacyID, RemovedRelease: r.RemovedRelease, Seen: r.Seen,
			Key: store.FieldRuleKey{Cluster: k.Cluster, Rule: r.FieldRule, Cell: k.Cell}})
	}
	for _, c := range cursors {
		b.Cursors = append(b.Cursors, countkey.Cursor(c))
	}
	return b
}

// duplicates is what the store says of a batch of reqs, in the order of
// reqs: which were duplicates, and which it skipped (nil when none).
func duplicates(reqs []Request, d store.Duplicates) ([]bool, []store.Skip) {
	out := make([]bool, len(reqs))
	var skipped []store.Skip
	api, field := 0, 0
	for i, r := range reqs {
		var why store.Skip
		if r.FieldRule == "" {
			out[i] = d.Requests[api]
			if d.Skipped != nil && d.Skipped.Requests != nil {
				why = d.Skipped.Requests[api]
			}
			api++
		} else {
			out[i] = d.FieldRules[field]
			if d.Skipped != nil && d.Skipped.FieldRules != nil {
				why = d.Skipped.FieldRules[field]
			}
			field++
		}
		if why != "" {
			if skipped == nil {
				skipped = make([]store.Skip, len(reqs))
			}
			skipped[i] = why
		}
	}
	return out, skipped
}
