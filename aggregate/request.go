package aggregate

import (
	"strings"

	"github.com/kube-sunset/sunset/store"
)

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
	Key store.CountKey
	// FieldRule names the field rule whose match this is; empty for a
	// request to an API.
	FieldRule      string
	RemovedRelease string
	// Seen, if set, records the pod and addresses behind the request.
	Seen *store.Sighting
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
func batch(reqs []Request, cursors []store.Cursor) store.Batch {
	b := store.Batch{Cursors: cursors}
	for _, r := range reqs {
		if r.FieldRule == "" {
			b.Requests = append(b.Requests, store.Request{ID: r.ID, Key: r.Key, RemovedRelease: r.RemovedRelease, Seen: r.Seen})
			continue
		}
		k := r.Key
		b.FieldRules = append(b.FieldRules, store.FieldRuleRequest{ID: r.ID, RemovedRelease: r.RemovedRelease, Seen: r.Seen,
			Key: store.FieldRuleKey{Cluster: k.Cluster, Rule: r.FieldRule, Hour: k.Hour, Node: k.Node, Subresource: k.Subresource,
				Username: k.Username, UserAgent: k.UserAgent, Verb: k.Verb, DryRun: k.DryRun}})
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
