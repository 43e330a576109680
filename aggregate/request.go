package aggregate

import (
	"strings"

	"github.com/kube-sunset/sunset/store"
)

// CountKey is where a request is counted: the store's key of one count.
type CountKey = store.CountKey

// Cell is the part of a CountKey that an API's counts and a field rule's
// share: hour, node, client and verb.
type Cell = store.Cell

// Sighting is who was behind one counted request.
type Sighting = store.Sighting

// Cursor is a position in an input, such as a file or Kafka offset,
// committed in the same transaction as the counts read up to it: after a
// crash, reading resumes exactly where the committed counts end. A cursor
// can hold any small value that must commit with counts: the fleet's
// outbox keeps requests waiting to be sent to Kafka this way.
type Cursor struct {
	Name  string
	Value []byte
}

// ErrNoSpace is matched by the errors of commits that the store refused
// for lack of disk space: nothing was committed, and retrying once there
// is room is safe.
var ErrNoSpace = store.ErrNoSpace

// Request is one request that counts, as Classify returns it and Apply
// commits it: a request to a deprecated or removed API, or, with FieldRule
// set, a request that set a deprecated field.
type Request struct {
	// ID identifies the request within its cluster for deduplication: the
	// event's ID, followed for a field rule's match by the rule's name, so
	// that each rule counts a request once.
	ID string
	// Key is where the request is counted. A field rule's match is
	// counted under its rule: Key.API is empty.
	Key CountKey
	// FieldRule names the field rule whose match this is; empty for a
	// request to an API.
	FieldRule      string
	RemovedRelease string
	// Seen, if set, records the pod and addresses behind the request.
	Seen *Sighting
}

// fieldRuleIDSeparator joins an event's ID and a field rule's name into
// the ID of the rule's match: the dedupe marks of stored matches hold it.
const fieldRuleIDSeparator = "#field:"

// fieldRuleID is the ID of rule's match of the event with the given ID.
func fieldRuleID(eventID, rule string) string { return eventID + fieldRuleIDSeparator + rule }

// EventID is the ID of the event the request came from: ID without a
// field rule's name.
func (r Request) EventID() string {
	if r.FieldRule == "" {
		return r.ID
	}
	return strings.TrimSuffix(r.ID, fieldRuleIDSeparator+r.FieldRule)
}

// batch sorts reqs into the store's requests to APIs and to field rules.
func batch(reqs []Request, cursors []Cursor) store.Batch {
	var b store.Batch
	for _, r := range reqs {
		if r.FieldRule == "" {
			b.Requests = append(b.Requests, store.Request{ID: r.ID, Key: r.Key, RemovedRelease: r.RemovedRelease, Seen: r.Seen})
			continue
		}
		k := r.Key
		b.FieldRules = append(b.FieldRules, store.FieldRuleRequest{ID: r.ID, RemovedRelease: r.RemovedRelease, Seen: r.Seen,
			Key: store.FieldRuleKey{Cluster: k.Cluster, Rule: r.FieldRule, Cell: k.Cell}})
	}
	for _, c := range cursors {
		b.Cursors = append(b.Cursors, store.Cursor(c))
	}
	return b
}

// duplicates is what the store says of a batch of reqs, in the order of
// reqs.
func duplicates(reqs []Request, d store.Duplicates) []bool {
	out := make([]bool, len(reqs))
	api, field := 0, 0
	for i, r := range reqs {
		if r.FieldRule == "" {
			out[i] = d.Requests[api]
			api++
		} else {
			out[i] = d.FieldRules[field]
			field++
		}
	}
	return out
}
