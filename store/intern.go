package store

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/kube-sunset/sunset/countkey"
)

// maxInterned bounds the strings one scan remembers. A day of one API has
// a few thousand distinct nodes, clients and verbs (the client cap keeps
// it so); past the bound, strings are simply allocated.
const maxInterned = 1 << 16

// interner gives every distinct string met in one scan a single copy, so
// that decoding a count key allocates only for values not seen before in
// that scan: a day of a busy API repeats the same clients in every hour
// and node.
type interner struct {
	strings map[string]string
	// last holds the node, subresource, username, user agent and verb of
	// the key decoded last.
	last [5]string
}

func newInterner() *interner { return &interner{strings: map[string]string{}} }

func (in *interner) intern(b []byte) string {
	if s, ok := in.strings[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in.strings) < maxInterned {
		in.strings[s] = s
	}
	return s
}

// readString is the package's readString with interned results.
func (in *interner) readString(b []byte) (string, []byte, error) {
	i := bytes.IndexByte(b, 0x00)
	if i >= 0 && i+1 < len(b) && b[i+1] == 0x01 {
		return in.intern(b[:i]), b[i+2:], nil
	}
	// An escaped NUL inside the value, or a corrupt key.
	s, rest, err := readString(b)
	if err != nil {
		return "", nil, err
	}
	return in.intern([]byte(s)), rest, nil
}

// decodeCountKeyAfter decodes what follows prefix, the encoded cluster and
// API of a count key, into k. Keys come in order, so a field is most often
// the same as in the key before: that is checked before the table.
func (in *interner) decodeCountKeyAfter(b []byte, k *countkey.CountKey) error {
	if len(b) < 8 {
		return errCorruptKey
	}
	k.Hour = time.Unix(int64(binary.BigEndian.Uint64(b)), 0).UTC()
	b = b[8:]
	for i, field := range [...]*string{&k.Node, &k.Subresource, &k.Username, &k.UserAgent, &k.Verb} {
		j := bytes.IndexByte(b, 0x00)
		if j >= 0 && j+1 < len(b) && b[j+1] == 0x01 && string(b[:j]) == in.last[i] {
			*field, b = in.last[i], b[j+2:]
			continue
		}
		var err error
		if *field, b, err = in.readString(b); err != nil {
			return err
		}
		in.last[i] = *field
	}
	if len(b) != 1 {
		return errCorruptKey
	}
	k.DryRun = b[0]&flagDryRun != 0
	k.Removed = b[0]&flagRemoved != 0
	return nil
}
