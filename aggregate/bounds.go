package aggregate

import "github.com/kube-sunset/sunset/store"

// Bounds of what the store keeps, for inputs that check what a sender
// wrote before handing it over (fleet records): ingest does not import
// the store. MaxUsernameBytes and MaxUserAgentBytes are in aggregate.go.
const (
	// MaxIDBytes bounds a request's ID as its dedupe mark holds it; a
	// longer one is kept as its digest.
	MaxIDBytes          = store.MaxIDBytes
	MaxClusterBytes     = store.MaxClusterBytes
	MaxNodeBytes        = store.MaxNodeBytes
	MaxSubresourceBytes = store.MaxSubresourceBytes
	// MaxGroupBytes, MaxVersionBytes and MaxResourceBytes bound the parts
	// of an API's name; a request with a longer one is refused
	// (ResultTooLong), never shortened.
	MaxGroupBytes    = store.MaxGroupBytes
	MaxVersionBytes  = store.MaxVersionBytes
	MaxResourceBytes = store.MaxResourceBytes
	// MaxAPIBytes bounds resource.version.group.
	MaxAPIBytes  = store.MaxAPIBytes
	MaxVerbBytes = store.MaxVerbBytes
	// MaxRuleBytes bounds a field rule's name.
	MaxRuleBytes = store.MaxRuleBytes
	// MaxReleaseBytes bounds a removed release ("1.37") as an input
	// hands it over: the k8s.io/removed-release annotation, which the
	// decoder drops when it is longer or not a release, and a fleet
	// record's removedRelease, which is refused when longer. It is far
	// above any Kubernetes release, and below what the store keeps.
	MaxReleaseBytes = 32
)

// The store keeps usernames and user agents to the same bounds as
// aggregate truncates them to.
var (
	_ = [1]struct{}{}[MaxUsernameBytes-store.MaxUsernameBytes]
	_ = [1]struct{}{}[MaxUserAgentBytes-store.MaxUserAgentBytes]
)
