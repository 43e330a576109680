package fleet

import (
	"crypto/hmac"
	"crypto/sha256"

	kafkago "github.com/segmentio/kafka-go"
)

// Who may write for a cluster. Any credential that may produce to the
// fleet's topic could otherwise write counts for any cluster and hour: a
// forged call to a removed API fails another cluster's upgrade check, and
// invented clients fill its caps. So, with kafka.fleet.keysFile or
// kafka.fleet.keys, every record carries the id of a key of its own
// cluster (header sunset-key) and an HMAC-SHA256 of the record under that
// key (header sunset-signature), and counting replicas count only records
// whose signature checks with a key of the cluster the record names.
// Whoever holds cluster A's key writes for A alone; a record copied from
// A and relabelled B, or signed with A's key for B, is refused.
const (
	headerKeyID     = "sunset-key"
	headerSignature = "sunset-signature"
	// signContext separates these signatures from any other use of the
	// same secret.
	signContext = "sunset-fleet-record-v1\x00"
)

// Reasons a record's signature is refused; values of the result label.
const (
	reasonUnsigned     = "unsigned"
	reasonUnknownKey   = "unknown_key"
	reasonBadSignature = "bad_signature"
)

// keyring holds the keys of kafka.fleet: by cluster, in order; the first
// of a cluster signs.
type keyring struct {
	byCluster map[string][]Key
}

func newKeyring(keys []Key) *keyring {
	if len(keys) == 0 {
		return nil
	}
	k := &keyring{byCluster: map[string][]Key{}}
	for _, key := range keys {
		k.byCluster[key.Cluster] = append(k.byCluster[key.Cluster], key)
	}
	return k
}

func mac(secret []byte, id string, value []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(signContext))
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write(value)
	return h.Sum(nil)
}

// sign adds the headers that sign m, a record of cluster; false if this
// replica holds no key of cluster.
func (k *keyring) sign(m *kafkago.Message, cluster string) bool {
	keys := k.byCluster[cluster]
	if len(keys) == 0 {
		return false
	}
	key := keys[0]
	m.Headers = append(m.Headers, kafkago.Header{Key: headerKeyID, Value: []byte(key.ID)},
		kafkago.Header{Key: headerSignature, Value: mac(key.Secret, key.ID, m.Value)})
	return true
}

// verify checks that m, a record naming cluster, is signed by a key of
// that cluster; it returns the reason it is not, or "".
func (k *keyring) verify(m kafkago.Message, cluster string) string {
	var id, sig []byte
	var ids, sigs int
	for _, h := range m.Headers {
		switch h.Key {
		case headerKeyID:
			id, ids = h.Value, ids+1
		case headerSignature:
			sig, sigs = h.Value, sigs+1
		}
	}
	if ids != 1 || sigs != 1 {
		// None, or two of either: which one was meant is not for the
		// reader to guess.
		return reasonUnsigned
	}
	for _, key := range k.byCluster[cluster] {
		if key.ID == string(id) {
			if hmac.Equal(sig, mac(key.Secret, key.ID, m.Value)) {
				return ""
			}
			return reasonBadSignature
		}
	}
	return reasonUnknownKey
}
