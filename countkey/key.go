// Package countkey is where a request is counted, as every layer names it:
// the key of one count (CountKey, Cell), who was behind it (Sighting),
// the bounds of each part, the API names that key it, an input's
// position committed with the counts (Cursor), and the store's refusals
// an input answers for (ErrNoSpace, ErrUnstorable).
//
// The store writes these, the committer hands them over, the inputs check
// what a sender wrote against the bounds, and the API and the exporter
// read them back: each imports this package and none of the others for
// it. It imports nothing of Sunset's.
package countkey

import "time"

// CountKey identifies one counted cell: requests to one API of one cluster in
// one UTC hour, served by one apiserver node, made by one client with one verb.
type CountKey struct {
	Cluster string
	API     string // resource.version.group, e.g. "endpoints.v1"
	Cell
	// Removed marks requests to an API that was already removed: the
	// client got a 404 and is broken now.
	Removed bool
}

// Cell is the part of a count's key that an API's counts and a field
// rule's share: one UTC hour, one apiserver node, one client, one verb.
type Cell struct {
	Hour        time.Time
	Node        string
	Subresource string
	Username    string
	UserAgent   string
	Verb        string
	DryRun      bool
}

// Sighting is who was behind one counted request: the pod and node of a
// pod-bound service account token, the client addresses, the
// impersonator.
type Sighting struct {
	PodName, PodNode string
	SourceIPs        []string
	// ImpersonatedBy is the real caller when the request was made as this
	// client through impersonation.
	ImpersonatedBy string
	At             time.Time
}

// Cursor is a position in an input, such as a file or Kafka offset,
// committed in the same transaction as the counts read up to it: after a
// crash, reading resumes exactly where the committed counts end. A cursor
// can hold any small value that must commit with counts: the fleet's
// outbox keeps requests waiting to be sent to Kafka this way.
type Cursor struct {
	Name  string
	Value []byte
}
