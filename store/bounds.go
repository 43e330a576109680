package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// The bounds on every part of a key are countkey's (MaxIDBytes and the
// others): the store skips a request with a part over its bound.

// Bounds on what a request brings to the values the store writes. They
// are not parts of a key, but a sender chooses them just the same: an
// API's metadata record keeps the removed release (and the store keeps
// every API's metadata in memory), a client's workload record keeps the
// sighting.
const (
	// MaxReleaseBytes bounds a removed release ("1.37").
	MaxReleaseBytes = 63
	// MaxSightingBytes bounds the strings of one sighting together: its
	// pod, node, source addresses and impersonator.
	MaxSightingBytes = 16 << 10
)

// Badger's own limits on one record, with the options the store opens it
// with (open.go, space.go). Badger checks them as a record is added to a
// transaction and fails the whole transaction when one is over: the store
// checks every record first (setEntry), so that the record is refused
// alone.
//   - A key over 65,000 bytes is refused (badger's maxKeySize).
//   - A value over ValueLogFileSize (valueLogFileSize, 8 MiB) is refused.
//   - A transaction holds at most 15% of MemTableSize (1.2 MiB with the
//     store's 8 MiB memtables), counting a value below ValueThreshold
//     (1 MiB, badger's default) whole and a larger one as the 12 bytes of
//     its pointer into the value log: beyond it badger answers
//     ErrTxnTooBig, and the store splits the transaction (isolating) down
//     to one request, whose records fit unless one of them is itself too
//     big.
const (
	maxKeyBytes   = 65000
	maxValueBytes = valueLogFileSize
)

// unstorableError is an ErrUnstorable with the reason a request it
// belongs to is skipped for.
type unstorableError struct {
	why countkey.Skip
	msg string
}

func (e *unstorableError) Error() string        { return e.msg }
func (e *unstorableError) Is(target error) bool { return target == countkey.ErrUnstorable }

// recordTooLarge is the error of a record over badger's limits. It says
// the sizes but never the record: its bytes come from senders.
func recordTooLarge(key, value int) error {
	return &unstorableError{why: countkey.SkipTooLarge, msg: fmt.Sprintf("store: a record with a key of %d bytes and a value of %d bytes is over badger's limits (%d and %d bytes)", key, value, maxKeyBytes, maxValueBytes)}
}

// damaged is the error of a stored record a write cannot read.
func damaged(what string, err error) error {
	return &unstorableError{why: countkey.SkipUnstorable, msg: fmt.Sprintf("store: a stored %s is damaged: %v", what, err)}
}

// skipReason is why a request whose write failed with err alone is
// skipped, or "" when err does not let it be.
func skipReason(err error) countkey.Skip {
	var ue *unstorableError
	switch {
	case errors.As(err, &ue):
		return ue.why
	case errors.Is(err, badger.ErrTxnTooBig):
		// Its records alone are more than a transaction holds.
		return countkey.SkipTooLarge
	}
	return ""
}

// what names the subject's kind in the store's log lines.
func (sub *subject) what() string {
	if sub == fieldRuleSubject {
		return "field rule"
	}
	return "API"
}

// valueTooLarge names what r brings to a value over its bound, and its
// length; the name is empty when nothing is.
func valueTooLarge(r countkey.Request) (string, int) {
	if len(r.RemovedRelease) > MaxReleaseBytes {
		return "removedRelease", len(r.RemovedRelease)
	}
	if s := r.Seen; s != nil {
		n := len(s.PodName) + len(s.PodNode) + len(s.ImpersonatedBy)
		for _, ip := range s.SourceIPs {
			n += len(ip)
		}
		if n > MaxSightingBytes {
			return "sighting", n
		}
	}
	return "", 0
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
func tooLong(sub *subject, k countkey.CountKey) (string, int) {
	api := countkey.MaxAPIBytes
	if sub == fieldRuleSubject {
		api = countkey.MaxRuleBytes
	}
	return overBound(part{"cluster", k.Cluster, countkey.MaxClusterBytes}, part{"api", k.API, api},
		part{"node", k.Node, countkey.MaxNodeBytes}, part{"subresource", k.Subresource, countkey.MaxSubresourceBytes},
		part{"username", k.Username, countkey.MaxUsernameBytes}, part{"userAgent", k.UserAgent, countkey.MaxUserAgentBytes},
		part{"verb", k.Verb, countkey.MaxVerbBytes})
}

// admissionTooLong is tooLong for an admission request.
func admissionTooLong(r countkey.Request) (string, int) {
	if name, n := overBound(part{"cluster", r.Key.Cluster, countkey.MaxClusterBytes}); name != "" {
		return name, n
	}
	for _, row := range r.Admission {
		k := row.Key
		if name, n := overBound(part{"cluster", k.Cluster, countkey.MaxClusterBytes}, part{"group", k.Group, countkey.MaxGroupBytes},
			part{"version", k.Version, countkey.MaxVersionBytes}, part{"resource", k.Resource, countkey.MaxResourceBytes},
			part{"subresource", k.Subresource, countkey.MaxSubresourceBytes}, part{"type", k.Type, countkey.MaxRuleBytes},
			part{"configuration", k.Configuration, countkey.MaxRuleBytes}, part{"webhook", k.Webhook, countkey.MaxRuleBytes}); name != "" {
			return name, n
		}
	}
	return "", 0
}

// skipLog logs the first request skipped for each part of a key or value
// and reason, with the part's name and length but never its value: it is
// attacker-controlled and may hold anything, secrets and terminal escapes
// included.
type skipLog struct {
	mu     sync.Mutex
	logged map[string]bool
}

func (s *Store) logSkip(what, part string, length int, why countkey.Skip) {
	s.skipped.mu.Lock()
	defer s.skipped.mu.Unlock()
	if s.skipped.logged[what+"/"+part+"/"+string(why)] {
		return
	}
	if s.skipped.logged == nil {
		s.skipped.logged = map[string]bool{}
	}
	s.skipped.logged[what+"/"+part+"/"+string(why)] = true
	msg := "skipped a request: a part of its key is longer than the store's bound (logged once per part); the rest of its batch is counted"
	if why == countkey.SkipTooLarge {
		msg = "skipped a request: what it would store is larger than the store's bound (logged once per part); the rest of its batch is counted"
	}
	s.log.Warn().Str("kind", what).Str("part", part).Int("bytes", length).Str("reason", string(why)).Msg(msg)
}

// logRefused logs the first request of each kind and reason that badger
// or the store refused as it was written (skipReason).
func (s *Store) logRefused(what string, why countkey.Skip, err error) {
	s.skipped.mu.Lock()
	defer s.skipped.mu.Unlock()
	if s.skipped.logged[what+"//"+string(why)] {
		return
	}
	if s.skipped.logged == nil {
		s.skipped.logged = map[string]bool{}
	}
	s.skipped.logged[what+"//"+string(why)] = true
	s.log.Warn().Err(err).Str("kind", what).Str("reason", string(why)).
		Msg("skipped a request whose records cannot be stored (logged once per reason); the rest of its batch is counted")
}

// setEntry is txn.SetEntry for a record within badger's limits, and an
// error that matches ErrUnstorable, without touching the transaction,
// for any other. The error never holds the record: badger's own error
// for a key or value over its limits carries a hex dump of the key's
// first KiB, bytes a sender chose, which would reach the log and the
// sender's error answer.
func setEntry(txn *badger.Txn, e *badger.Entry) error {
	if len(e.Key) > maxKeyBytes || len(e.Value) > maxValueBytes {
		return recordTooLarge(len(e.Key), len(e.Value))
	}
	err := txn.SetEntry(e)
	if err == nil || errors.Is(err, badger.ErrTxnTooBig) {
		return err
	}
	if msg := err.Error(); strings.HasPrefix(msg, "Key with size") || strings.HasPrefix(msg, "Value with size") {
		return recordTooLarge(len(e.Key), len(e.Value))
	}
	return err
}
