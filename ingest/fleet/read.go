package fleet

import (
	"bytes"
	"strconv"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// readRecord decodes value into rec as a json.Decoder with unknown fields
// disallowed would, without reflection, for the records Sunset writes:
// every key spelt exactly and given once, every value of its type. It
// reports false, leaving rec in any state, for anything else, which
// decodeRecord then hands to encoding/json for its exact answer or
// error. FuzzReadRecord holds the two to the same result.
//
// A counting replica decodes every record it reads; encoding/json's
// decoder was a third of its CPU.
func readRecord(value []byte, rec *record) bool {
	b := bytes.TrimLeft(value, " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	var seen uint32
	once := func(bit uint32) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	end := auditjson.WalkObject(b, 0, 1, func(key []byte, plain bool, start int) int {
		if !plain || start >= len(b) {
			return -1
		}
		var bit uint32
		var read func() int
		switch string(key) {
		case "v":
			bit, read = 1<<0, func() int { return readInt(b, start, &rec.V) }
		case "cluster":
			bit, read = 1<<1, func() int { return auditjson.ReadString(b, start, &rec.Cluster) }
		case "id":
			bit, read = 1<<2, func() int { return auditjson.ReadString(b, start, &rec.ID) }
		case "api":
			bit, read = 1<<3, func() int { return auditjson.ReadString(b, start, &rec.API) }
		case "subresource":
			bit, read = 1<<4, func() int { return auditjson.ReadString(b, start, &rec.Subresource) }
		case "hour":
			bit, read = 1<<5, func() int { return readTime(b, start, 1, rec.Hour.UnmarshalJSON) }
		case "node":
			bit, read = 1<<6, func() int { return auditjson.ReadString(b, start, &rec.Node) }
		case "user":
			bit, read = 1<<7, func() int { return auditjson.ReadString(b, start, &rec.User) }
		case "userAgent":
			bit, read = 1<<8, func() int { return auditjson.ReadString(b, start, &rec.UserAgent) }
		case "verb":
			bit, read = 1<<9, func() int { return auditjson.ReadString(b, start, &rec.Verb) }
		case "dryRun":
			bit, read = 1<<10, func() int { return readBool(b, start, &rec.DryRun) }
		case "removed":
			bit, read = 1<<11, func() int { return readBool(b, start, &rec.Removed) }
		case "removedRelease":
			bit, read = 1<<12, func() int { return auditjson.ReadString(b, start, &rec.RemovedRelease) }
		case "seen":
			bit, read = 1<<13, func() int { return readSeen(b, start, &rec.Seen) }
		default:
			// Another spelling or an unknown field: encoding/json's
			// to judge.
			return -1
		}
		if !once(bit) {
			return -1
		}
		return read()
	})
	return end >= 0 && len(bytes.TrimLeft(b[end:], " \t\r\n")) == 0
}

// readSeen reads a record's sighting, an object or null at b[start].
func readSeen(b []byte, start int, dst **seen) int {
	if b[start] == 'n' {
		*dst = nil
		return auditjson.Literal(b, start, "null")
	}
	if b[start] != '{' {
		return -1
	}
	s := new(seen)
	*dst = s
	var done uint32
	return auditjson.WalkObject(b, start, 2, func(key []byte, plain bool, i int) int {
		if !plain || i >= len(b) {
			return -1
		}
		var bit uint32
		var read func() int
		switch string(key) {
		case "pod":
			bit, read = 1<<0, func() int { return auditjson.ReadString(b, i, &s.Pod) }
		case "podNode":
			bit, read = 1<<1, func() int { return auditjson.ReadString(b, i, &s.PodNode) }
		case "sourceIPs":
			bit, read = 1<<2, func() int { return readIPList(b, i, 3, &s.SourceIPs) }
		case "impersonatedBy":
			bit, read = 1<<3, func() int { return auditjson.ReadString(b, i, &s.ImpersonatedBy) }
		case "at":
			bit, read = 1<<4, func() int { return readTime(b, i, 2, s.At.UnmarshalJSON) }
		default:
			return -1
		}
		if done&bit != 0 {
			return -1
		}
		done |= bit
		return read()
	})
}

// readBool reads true, false or null (which leaves dst as it was).
func readBool(b []byte, start int, dst *bool) int {
	switch b[start] {
	case 't':
		*dst = true
		return auditjson.Literal(b, start, "true")
	case 'f':
		*dst = false
		return auditjson.Literal(b, start, "false")
	case 'n':
		return auditjson.Literal(b, start, "null")
	}
	return -1
}

// readInt reads an integer or null (which leaves dst as it was); a
// fraction, an exponent or an overflow is left to encoding/json.
func readInt(b []byte, start int, dst *int) int {
	if b[start] == 'n' {
		return auditjson.Literal(b, start, "null")
	}
	end := auditjson.SkipValue(b, start, 1)
	if end < 0 || b[start] == '"' || b[start] == '{' || b[start] == '[' {
		return -1
	}
	n, err := strconv.Atoi(string(b[start:end]))
	if err != nil {
		return -1
	}
	*dst = n
	return end
}

// readTime hands the value at b[start], whatever it is, to time.Time's
// own UnmarshalJSON, as encoding/json does; depth counts the containers
// around it.
func readTime(b []byte, start, depth int, unmarshal func([]byte) error) int {
	end := auditjson.SkipValue(b, start, depth)
	if end < 0 || unmarshal(b[start:end]) != nil {
		return -1
	}
	return end
}

// readIPList reads the array of strings or null at b[start] into dst,
// keeping at most one entry past countkey.MaxSourceIPs: enough for
// tooLong to refuse the record, while the rest are only checked to be
// strings. A sender's list of millions of entries is thus walked, never
// held. depth counts the array and the containers around it.
func readIPList(b []byte, start, depth int, dst *ipList) int {
	if start < len(b) && b[start] == 'n' {
		*dst = nil
		return auditjson.Literal(b, start, "null")
	}
	if start >= len(b) || b[start] != '[' {
		return -1
	}
	out := ipList{}
	end := auditjson.WalkArray(b, start, depth, func(i int) int {
		if len(out) > countkey.MaxSourceIPs {
			if i >= len(b) || b[i] != '"' {
				return -1
			}
			return auditjson.SkipValue(b, i, depth)
		}
		s, end := auditjson.StringAt(b, i)
		if end >= 0 {
			out = append(out, s)
		}
		return end
	})
	if end >= 0 {
		*dst = out
	}
	return end
}
