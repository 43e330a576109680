package store

import (
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/countkey"
)

// Key prefixes. Each record kind has its own byte so that one kind can be
// scanned without touching the others.
const (
	prefixCount byte = 0x01
	prefixMark  byte = 0x02
	prefixMeta  byte = 0x03
	// prefixCursor keys input positions (file offsets, Kafka offsets)
	// committed with the counts they produced.
	prefixCursor byte = 0x04
	// Field rules' counts, metadata and workload records: the layouts of
	// an API's, with the rule's name in place of the API's.
	prefixFieldRuleCount    byte = 0x06
	prefixFieldRuleMeta     byte = 0x07
	prefixFieldRuleWorkload byte = 0x08
)

// subject is a kind of thing requests are counted against: APIs, or field
// rules. Each kind keeps its counts, metadata and workload records under
// prefix bytes of its own, so that neither can be mistaken for the other,
// and shares everything else: dedupe marks, the client cap, expiry.
type subject struct {
	count, meta, workload byte
}

var (
	apiSubject       = &subject{count: prefixCount, meta: prefixMeta, workload: prefixWorkload}
	fieldRuleSubject = &subject{count: prefixFieldRuleCount, meta: prefixFieldRuleMeta, workload: prefixFieldRuleWorkload}
)

func encodeCursorKey(name string) []byte {
	return append([]byte{prefixCursor}, name...)
}

// Flag bits of the last byte of a count key.
const (
	flagDryRun  byte = 1 << 0
	flagRemoved byte = 1 << 1
)

var errCorruptKey = errors.New("store: corrupt key")

// appendString appends s so that the encoding sorts like s and ends with a
// terminator that no encoded string contains. A 0x00 inside s is written as
// 0x00 0xFF and the terminator is 0x00 0x01, so hostile values such as a user
// agent with NUL bytes can never run into the next field.
//
// The bytes between NULs are copied as runs, not one by one: every count,
// workload record and client of a commit is keyed with it, and the loop
// byte by byte was 4.5 % of a counting replica's CPU.
func appendString(b []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, 0x00)
		if i < 0 {
			break
		}
		b = append(append(b, s[:i]...), 0x00, 0xFF)
		s = s[i+1:]
	}
	return append(append(b, s...), 0x00, 0x01)
}

// readString decodes one string written by appendString and returns the rest.
func readString(b []byte) (string, []byte, error) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0x00 {
			continue
		}
		if i+1 >= len(b) {
			return "", nil, errCorruptKey
		}
		switch b[i+1] {
		case 0x01:
			if out == nil {
				return string(b[:i]), b[i+2:], nil
			}
			out = append(out, b[:i]...)
			return string(out), b[i+2:], nil
		case 0xFF:
			out = append(out, b[:i+1]...)
			b = b[i+2:]
			i = -1
		default:
			return "", nil, errCorruptKey
		}
	}
	return "", nil, errCorruptKey
}

func appendHour(b []byte, hour time.Time) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(hour.Unix()))
}

// apiPrefix is the prefix of every count of one API in one cluster.
func apiPrefix(cluster, api string) []byte { return apiSubject.countPrefix(cluster, api) }

// countPrefix is the prefix of every count of one subject (an API or a
// field rule) in one cluster.
func (sub *subject) countPrefix(cluster, name string) []byte {
	b := make([]byte, 0, 1+len(cluster)+len(name)+4)
	b = append(b, sub.count)
	b = appendString(b, cluster)
	return appendString(b, name)
}

func encodeCountKey(k countkey.CountKey) []byte { return apiSubject.countKey(k) }

// countKey encodes the key of a count; for a field rule, k.API holds the
// rule's name.
func (sub *subject) countKey(k countkey.CountKey) []byte {
	b := make([]byte, 0, 48+len(k.Cluster)+len(k.API)+len(k.Node)+len(k.Subresource)+len(k.Username)+len(k.UserAgent)+len(k.Verb))
	b = append(b, sub.count)
	b = appendString(b, k.Cluster)
	b = appendString(b, k.API)
	b = appendHour(b, k.Hour)
	b = appendString(b, k.Node)
	b = appendString(b, k.Subresource)
	b = appendString(b, k.Username)
	b = appendString(b, k.UserAgent)
	b = appendString(b, k.Verb)
	var flags byte
	if k.DryRun {
		flags |= flagDryRun
	}
	if k.Removed {
		flags |= flagRemoved
	}
	return append(b, flags)
}

// decodeCountKey decodes the key of a count of either subject; for a field
// rule, API holds the rule's name.
func decodeCountKey(b []byte) (countkey.CountKey, error) {
	var k countkey.CountKey
	if len(b) == 0 || (b[0] != prefixCount && b[0] != prefixFieldRuleCount) {
		return k, errCorruptKey
	}
	b = b[1:]
	var err error
	if k.Cluster, b, err = readString(b); err != nil {
		return k, err
	}
	if k.API, b, err = readString(b); err != nil {
		return k, err
	}
	if len(b) < 8 {
		return k, errCorruptKey
	}
	k.Hour = time.Unix(int64(binary.BigEndian.Uint64(b)), 0).UTC()
	b = b[8:]
	for _, field := range []*string{&k.Node, &k.Subresource, &k.Username, &k.UserAgent, &k.Verb} {
		if *field, b, err = readString(b); err != nil {
			return k, err
		}
	}
	if len(b) != 1 {
		return k, errCorruptKey
	}
	k.DryRun = b[0]&flagDryRun != 0
	k.Removed = b[0]&flagRemoved != 0
	return k, nil
}

// encodeMarkKey is the key of a dedupe mark: prefixMark for a request
// counted, prefixAdmissionMark for its webhook calls counted. A long ID is
// digested (MarkID), so that no ID can make the key too long for badger.
func encodeMarkKey(prefix byte, cluster, id string) []byte {
	return rawMarkKey(prefix, cluster, countkey.MarkID(id))
}

// rawMarkKey is a dedupe mark's key with id as given: the form of every
// mark before IDs were digested, and of IDs up to MaxIDBytes still.
func rawMarkKey(prefix byte, cluster, id string) []byte {
	b := make([]byte, 0, 4+len(cluster)+len(id))
	b = append(b, prefix)
	b = appendString(b, cluster)
	return append(b, id...)
}

func (sub *subject) metaKey(cluster, name string) []byte {
	b := make([]byte, 0, 5+len(cluster)+len(name))
	b = append(b, sub.meta)
	b = appendString(b, cluster)
	return appendString(b, name)
}

// decodeMetaKey decodes the key of either subject's metadata.
func decodeMetaKey(b []byte) (cluster, api string, err error) {
	if len(b) == 0 || (b[0] != prefixMeta && b[0] != prefixFieldRuleMeta) {
		return "", "", errCorruptKey
	}
	if cluster, b, err = readString(b[1:]); err != nil {
		return "", "", err
	}
	if api, b, err = readString(b); err != nil {
		return "", "", err
	}
	if len(b) != 0 {
		return "", "", errCorruptKey
	}
	return cluster, api, nil
}
