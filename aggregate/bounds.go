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
	// MaxAPIBytes bounds resource.version.group.
	MaxAPIBytes  = store.MaxAPIBytes
	MaxVerbBytes = store.MaxVerbBytes
	// MaxRuleBytes bounds a field rule's name.
	MaxRuleBytes = store.MaxRuleBytes
)

// The store keeps usernames and user agents to the same bounds as
// aggregate truncates them to.
var (
	_ = [1]struct{}{}[MaxUsernameBytes-store.MaxUsernameBytes]
	_ = [1]struct{}{}[MaxUserAgentBytes-store.MaxUserAgentBytes]
)
