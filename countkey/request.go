package countkey

import "strings"

// Subject is what a Request counts against.
type Subject uint8

// Subjects.
const (
	// SubjectAPI is a request to a deprecated or removed API, counted
	// under Key.
	SubjectAPI Subject = iota
	// SubjectFieldRule is a request that set a deprecated field, counted
	// under its rule (FieldRule) with Key's cluster and cell.
	SubjectFieldRule
	// SubjectAdmission is a request's admission webhook counts
	// (Admission), added once per ID in Key's cluster and hour.
	SubjectAdmission
)

// Request is one request that counts, as the classifier makes it, the
// committer passes it on and the store counts it once: to an API, a field
// rule's match, or a request's admission webhook counts. Its Subject says
// which.
type Request struct {
	// ID identifies the request within its cluster for deduplication: the
	// event's identity (RequestID), followed for a field rule's match by
	// the rule's name, so that each rule counts a request once. One
	// longer than MaxIDBytes is stored as its digest (MarkID). API
	// requests and field rules' matches share one space of IDs per
	// cluster, admission requests have one of their own.
	ID string
	// LegacyID is the ID a store of schema 1 marked the request with, the
	// auditID alone, so that the store still recognises a request it
	// counted before it was upgraded. Empty for requests that did not
	// come from an event here.
	LegacyID string
	// Key is where the request is counted. A field rule's match is
	// counted under its rule: Key.API is empty. Admission counts use
	// Key.Cluster and Key.Hour.
	Key CountKey
	// FieldRule names the field rule whose match this is; empty for a
	// request to an API.
	FieldRule      string
	RemovedRelease string
	// Seen, if set, records the pod and addresses behind the request.
	Seen *Sighting
	// Admission are the admission webhook counts of an admission
	// request; nil for the others.
	Admission []AdmissionRow
}

// Subject is what r counts against.
func (r Request) Subject() Subject {
	switch {
	case r.Admission != nil:
		return SubjectAdmission
	case r.FieldRule != "":
		return SubjectFieldRule
	}
	return SubjectAPI
}

// FieldRuleIDSeparator joins an event's ID and a field rule's name into
// the ID of the rule's match: the dedupe marks of stored matches hold it.
const FieldRuleIDSeparator = "#field:"

// EventID is the ID of the event the request came from: ID without a
// field rule's name.
func (r Request) EventID() string {
	if r.FieldRule == "" {
		return r.ID
	}
	return strings.TrimSuffix(r.ID, FieldRuleIDSeparator+r.FieldRule)
}

// Outcome is what the store made of one Request of a commit.
type Outcome struct {
	// Duplicate is set for a request counted before.
	Duplicate bool
	// Skipped says why the store left the request out, neither counted
	// nor a duplicate; empty for the others.
	Skipped Skip
}

// Counted reports whether the request was counted by this commit.
func (o Outcome) Counted() bool { return !o.Duplicate && o.Skipped == "" }

// Skip says why the store left a request out: neither counted nor a
// duplicate. Values are metric label values.
type Skip string

// Why the store leaves a request out.
const (
	// SkipTooLong is a request with a part of its key over its bound.
	// The store does not shorten it: that could merge it with another
	// request's key, and whoever built the request should have bounded
	// it.
	SkipTooLong Skip = "too_long"
	// SkipTooLarge is a request that would store a value over its bound
	// (its removed release, its sighting), or a record over badger's
	// limits: the store never hands badger a record it would refuse,
	// which would fail the whole transaction.
	SkipTooLarge Skip = "too_large"
	// SkipUnstorable is a request that badger or the store refused for
	// another reason of its own, that would refuse it again: a damaged
	// record it would update. The requests committed with it are
	// counted.
	SkipUnstorable Skip = "unstorable"
)
