package countkey

import (
	"crypto/sha256"
	"encoding/hex"
)

// Bounds on every part of a key. Every string of a key comes from a sender
// (an audit event, a webhook path, a Kafka message, a fleet record), and
// badger refuses a key over 65,000 bytes by failing its whole transaction:
// one hostile value would cost every other request of the commit. With
// these bounds the longest key is a few KiB. The store skips a request
// with a part over its bound (too_long); inputs that check what a sender
// wrote before handing it over (fleet records) refuse it first.
//
// The names have Kubernetes' own limits: DNS subdomains (253) for cluster,
// node, group and webhook names, DNS labels (63) for versions and
// resources, OpenShift's APIRequestCount limits for usernames and user
// agents.
const (
	// MaxIDBytes bounds a request's ID in its dedupe mark: a longer one
	// is stored as its SHA-256 digest (MarkID).
	MaxIDBytes          = 128
	MaxClusterBytes     = 253
	MaxNodeBytes        = 253
	MaxSubresourceBytes = 253
	// MaxGroupBytes, MaxVersionBytes and MaxResourceBytes bound the parts
	// of an API's name; a request with a longer one is refused
	// (too_long), never shortened.
	MaxGroupBytes    = 253
	MaxVersionBytes  = 63
	MaxResourceBytes = 63
	// MaxAPIBytes bounds resource.version.group.
	MaxAPIBytes = MaxResourceBytes + 1 + MaxVersionBytes + 1 + MaxGroupBytes
	// MaxUsernameBytes and MaxUserAgentBytes are the bounds of
	// OpenShift's APIRequestCount CRD; longer ones are cut to them.
	MaxUsernameBytes  = 512
	MaxUserAgentBytes = 1024
	// MaxVerbBytes is far above any Kubernetes verb; senders' verbs are
	// folded into a fixed set before they get here.
	MaxVerbBytes = 63
	// MaxRuleBytes bounds a field rule's name, and an admission webhook's
	// type, configuration and name.
	MaxRuleBytes = 253
)

// Bounds on what an input hands over beside a key.
const (
	// MaxReleaseBytes bounds a removed release ("1.37") as an input
	// hands it over: the k8s.io/removed-release annotation, which the
	// decoder drops when it is longer or not a release, and a fleet
	// record's removedRelease, which is refused when longer. It is far
	// above any Kubernetes release, and below what the store keeps.
	MaxReleaseBytes = 32
	// MaxSourceIPs bounds the client addresses a decoder keeps of an
	// event and a workload record keeps of a client.
	MaxSourceIPs = 10
)

// MarkID is id as its dedupe mark holds it: unchanged up to MaxIDBytes,
// else "sha256:" and the hex digest of id. A digest never collides with a
// short ID a sender chose: finding one would take a SHA-256 preimage.
func MarkID(id string) string {
	if len(id) <= MaxIDBytes {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:])
}
