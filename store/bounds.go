package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	badger "github.com/dgraph-io/badger/v4"
)

// Bounds on every part of a key. Every string of a key comes from a sender
// (an audit event, a webhook path, a Kafka message, a fleet record), and
// badger refuses a key over 65,000 bytes by failing its whole transaction:
// one hostile value would cost every other request of the commit. With
// these bounds the longest key is a few KiB.
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
	MaxGroupBytes       = 253
	MaxVersionBytes     = 63
	MaxResourceBytes    = 63
	MaxSubresourceBytes = 253
	// MaxAPIBytes bounds resource.version.group.
	MaxAPIBytes       = MaxResourceBytes + 1 + MaxVersionBytes + 1 + MaxGroupBytes
	MaxUsernameBytes  = 512
	MaxUserAgentBytes = 1024
	// MaxVerbBytes is far above any Kubernetes verb; senders' verbs are
	// folded into a fixed set before they get here.
	MaxVerbBytes = 63
	// MaxRuleBytes bounds a field rule's name, and an admission webhook's
	// type, configuration and name.
	MaxRuleBytes = 253
)

// Skip says why the store left a request out: neither counted nor a
// duplicate. Values are metric label values.
type Skip string

// SkipTooLong is a request with a part of its key over its bound above.
// The store does not shorten it: that could merge it with another
// request's key, and whoever built the request should have bounded it.
const SkipTooLong Skip = "too_long"

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

// part is one string of a key and its bound.
type part struct {
	name  string
	value string
	max   int
}

// overBound returns the name and length of the first part over its bound;
// name is empty when there is none.
func overBound(parts ...part) (name string, length int) {
	for _, p := range parts {
		if len(p.value) > p.max {
			return p.name, len(p.value)
		}
	}
	return "", 0
}

// tooLong names the first part of k over its bound, and its length. For a
// field rule, k.API holds the rule's name.
func tooLong(sub *subject, k CountKey) (string, int) {
	api := MaxAPIBytes
	if sub == fieldRuleSubject {
		api = MaxRuleBytes
	}
	return overBound(part{"cluster", k.Cluster, MaxClusterBytes}, part{"api", k.API, api},
		part{"node", k.Node, MaxNodeBytes}, part{"subresource", k.Subresource, MaxSubresourceBytes},
		part{"username", k.Username, MaxUsernameBytes}, part{"userAgent", k.UserAgent, MaxUserAgentBytes},
		part{"verb", k.Verb, MaxVerbBytes})
}

// admissionTooLong is tooLong for an admission request.
func admissionTooLong(r AdmissionRequest) (string, int) {
	if name, n := overBound(part{"cluster", r.Cluster, MaxClusterBytes}); name != "" {
		return name, n
	}
	for _, row := range r.Rows {
		k := row.Key
		if name, n := overBound(part{"cluster", k.Cluster, MaxClusterBytes}, part{"group", k.Group, MaxGroupBytes},
			part{"version", k.Version, MaxVersionBytes}, part{"resource", k.Resource, MaxResourceBytes},
			part{"subresource", k.Subresource, MaxSubresourceBytes}, part{"type", k.Type, MaxRuleBytes},
			part{"configuration", k.Configuration, MaxRuleBytes}, part{"webhook", k.Webhook, MaxRuleBytes}); name != "" {
			return name, n
		}
	}
	return "", 0
}

// skipLog logs the first request skipped for each part of a key, with the
// part's name and length but never its value: it is attacker-controlled
// and may hold anything, secrets and terminal escapes included.
type skipLog struct {
	mu     sync.Mutex
	logged map[string]bool
}

func (s *Store) logSkip(what, part string, length int) {
	s.skipped.mu.Lock()
	defer s.skipped.mu.Unlock()
	if s.skipped.logged[what+"/"+part] {
		return
	}
	if s.skipped.logged == nil {
		s.skipped.logged = map[string]bool{}
	}
	s.skipped.logged[what+"/"+part] = true
	s.log.Warn().Str("kind", what).Str("part", part).Int("bytes", length).
		Msg("skipped a request: a part of its key is longer than the store's bound (logged once per part); the rest of its batch is counted")
}

// setEntry is txn.SetEntry with an error that never holds the record.
// badger's own error for a key or value over its limits carries a hex
// dump of the key's first KiB: bytes a sender chose, which would reach
// the log and the sender's error answer.
func setEntry(txn *badger.Txn, e *badger.Entry) error {
	err := txn.SetEntry(e)
	if err == nil || errors.Is(err, badger.ErrTxnTooBig) {
		return err
	}
	if msg := err.Error(); strings.HasPrefix(msg, "Key with size") || strings.HasPrefix(msg, "Value with size") {
		return fmt.Errorf("store: badger refused a record with a key of %d bytes and a value of %d bytes", len(e.Key), len(e.Value))
	}
	return err
}
