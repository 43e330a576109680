package auditjson

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// decodeWire decodes the event raw into w as json.Unmarshal would, without
// reflection: the scanner walks the event once and each counted field is
// read where it lies. It reports false, leaving w in any state, whenever it
// cannot be sure of giving encoding/json's result: invalid JSON, an escaped
// or non-ASCII key, a repeated field, a value of an unexpected type. The caller then decodes with encoding/json, which has
// the last word and the exact error. FuzzDecodeWire holds the two to the
// same result.
//
// Most events kube-apiserver writes have none of those, so encoding/json
// (about 15 µs for a 1.2 KB event, 37 % of a replay where every line
// counts) is left for the odd one.
func decodeWire(raw []byte, w *wireEvent) bool {
	i := skipSpace(raw, 0)
	if i >= len(raw) || at(raw, i) != '{' {
		return false
	}
	var seen fieldSet
	end := scanObject(raw, i, 1, func(key []byte, flags stringFlags, start int) int {
		if !flags.plain() {
			return -1
		}
		f := topField(key)
		if f == keyOther {
			return skipValue(raw, start, 1)
		}
		if !seen.add(f) {
			return -1
		}
		switch f {
		case keyKind:
			return w.Kind.read(raw, start)
		case keyAPIVersion:
			return w.APIVersion.read(raw, start)
		case keyAuditID:
			return w.AuditID.read(raw, start)
		case keyStage:
			return w.Stage.read(raw, start)
		case keyRequestURI:
			return w.RequestURI.read(raw, start)
		case keyVerb:
			return w.Verb.read(raw, start)
		case keyUserAgent:
			return w.UserAgent.read(raw, start)
		case keyRequestReceived:
			return w.RequestReceivedTimestamp.read(raw, start)
		case keyStageTimestamp:
			return w.StageTimestamp.read(raw, start)
		case keyIdentityTimestamp:
			return w.IdentityTimestamp.read(raw, start)
		case keySourceIPs:
			end, _ := w.SourceIPs.read(raw, start, 2)
			return end
		case keyUser:
			return readUser(raw, start, &w.User)
		case keyImpersonatedUser:
			if at(raw, start) == 'n' {
				w.ImpersonatedUser = nil
				return scanLiteral(raw, start, "null")
			}
			w.ImpersonatedUser = new(wireUser)
			return readUser(raw, start, w.ImpersonatedUser)
		case keyRequestObject:
			// Skipped where it lies, as rawValue takes it from
			// encoding/json: null included, and never copied here.
			end := skipValue(raw, start, 1)
			if end >= 0 {
				w.RequestObject = raw[start:end:end]
			}
			return end
		case keyObjectRef:
			return readObjectRef(raw, start, &w.ObjectRef)
		case keyResponseStatus:
			return readResponseStatus(raw, start, w)
		case keyAnnotations:
			end, _ := decodeAnnotations(raw, start, 2, &w.Annotations.annotationValues, nil)
			return end
		}
		return -1
	})
	return end >= 0 && skipSpace(raw, end) == len(raw)
}

// wireField names a field of wireEvent, or of one of its parts.
type wireField uint8

const (
	keyOther wireField = iota
	keyKind
	keyAPIVersion
	keyAuditID
	keyStage
	keyRequestURI
	keyVerb
	keyUser
	keyImpersonatedUser
	keySourceIPs
	keyRequestObject
	keyUserAgent
	keyObjectRef
	keyResponseStatus
	keyAnnotations
	keyRequestReceived
	keyStageTimestamp
	keyIdentityTimestamp
)

// fieldSet records the fields of one object read so far: a repeated one
// would be merged or replaced by encoding/json, which decodeWire leaves to
// it.
type fieldSet uint32

func (s *fieldSet) add(f wireField) bool {
	if *s&(1<<f) != 0 {
		return false
	}
	*s |= 1 << f
	return true
}

// topField matches an event's top-level key, plain ASCII, to its field as
// encoding/json does: in any case.
func topField(key []byte) wireField {
	switch len(key) {
	case 4:
		if equalFoldASCII(key, "kind") {
			return keyKind
		}
		if equalFoldASCII(key, "verb") {
			return keyVerb
		}
		if equalFoldASCII(key, "user") {
			return keyUser
		}
	case 5:
		if equalFoldASCII(key, "stage") {
			return keyStage
		}
	case 7:
		if equalFoldASCII(key, "auditid") {
			return keyAuditID
		}
	case 9:
		if equalFoldASCII(key, "sourceips") {
			return keySourceIPs
		}
		if equalFoldASCII(key, "useragent") {
			return keyUserAgent
		}
		if equalFoldASCII(key, "objectref") {
			return keyObjectRef
		}
	case 10:
		if equalFoldASCII(key, "apiversion") {
			return keyAPIVersion
		}
		if equalFoldASCII(key, "requesturi") {
			return keyRequestURI
		}
	case 11:
		if equalFoldASCII(key, "annotations") {
			return keyAnnotations
		}
	case 13:
		if equalFoldASCII(key, "requestobject") {
			return keyRequestObject
		}
	case 14:
		if equalFoldASCII(key, "responsestatus") {
			return keyResponseStatus
		}
		if equalFoldASCII(key, "stagetimestamp") {
			return keyStageTimestamp
		}
	case 16:
		if equalFoldASCII(key, "impersonateduser") {
			return keyImpersonatedUser
		}
	case 23:
		if equalFoldASCII(key, "sunsetidentitytimestamp") {
			return keyIdentityTimestamp
		}
	case 24:
		if equalFoldASCII(key, "requestreceivedtimestamp") {
			return keyRequestReceived
		}
	}
	return keyOther
}

// readString reads the string or null at b[start] into dst. A null leaves
// dst as it was, as encoding/json does. It returns the offset after the
// value, or -1 for any other type.
func readString(b []byte, start int, dst *string) int {
	if at(b, start) == 'n' {
		return scanLiteral(b, start, "null")
	}
	s, end := stringAt(b, start)
	if end >= 0 {
		*dst = s
	}
	return end
}

// stringAt decodes the string at b[start] and returns the offset after it,
// or -1 if there is none. A string whose raw bytes are its value, the
// usual case, is taken as is; one with escapes (kube-apiserver writes an
// & in a URI as \u0026) or invalid UTF-8 is decoded by encoding/json.
func stringAt(b []byte, start int) (string, int) {
	if at(b, start) != '"' {
		return "", -1
	}
	end, flags := scanString(b, start)
	if end < 0 {
		return "", -1
	}
	s := b[start+1 : end-1]
	if flags&flagEscaped != 0 || flags&flagNonASCII != 0 && !utf8.Valid(s) {
		var v string
		if json.Unmarshal(b[start:end], &v) != nil {
			return "", -1
		}
		return v, end
	}
	return intern(s), end
}

// intern returns the values most events share without allocating them.
func intern(s []byte) string {
	switch string(s) {
	case "":
		return ""
	case KindEvent:
		return KindEvent
	case APIVersion:
		return APIVersion
	case "ResponseComplete":
		return "ResponseComplete"
	case "RequestReceived":
		return "RequestReceived"
	case "ResponseStarted":
		return "ResponseStarted"
	case "get":
		return "get"
	case "list":
		return "list"
	case "watch":
		return "watch"
	case "create":
		return "create"
	case "update":
		return "update"
	case "patch":
		return "patch"
	case "delete":
		return "delete"
	case "v1":
		return "v1"
	}
	return string(s)
}

// readStrings reads the array of strings or null at b[start] into dst, as
// a []string: null makes it nil, an empty array empty. depth counts the
// array and the containers around it.
func readStrings(b []byte, start, depth int, dst *[]string) int {
	if at(b, start) == 'n' {
		*dst = nil
		return scanLiteral(b, start, "null")
	}
	if at(b, start) != '[' {
		return -1
	}
	out := make([]string, 0, 1)
	end := scanArray(b, start, depth, func(i int) int {
		s, end := stringAt(b, i)
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

// readUser reads the user object or null at b[start], a top-level value.
func readUser(b []byte, start int, u *wireUser) int {
	if at(b, start) == 'n' {
		return scanLiteral(b, start, "null")
	}
	if at(b, start) != '{' {
		return -1
	}
	var seen fieldSet
	return scanObject(b, start, 2, func(key []byte, flags stringFlags, i int) int {
		switch {
		case !flags.plain():
			return -1
		case equalFoldASCII(key, "username"):
			if !seen.add(1) {
				return -1
			}
			return u.Username.read(b, i)
		case equalFoldASCII(key, "extra"):
			if !seen.add(2) {
				return -1
			}
			return readExtra(b, i, u)
		}
		return skipValue(b, i, 2)
	})
}

// readExtra reads a user's extra, at depth 3, keeping the first value of
// each of the pod-bound token's keys.
func readExtra(b []byte, start int, u *wireUser) int {
	if at(b, start) == 'n' {
		return scanLiteral(b, start, "null")
	}
	if at(b, start) != '{' {
		return -1
	}
	var seen fieldSet
	return scanObject(b, start, 3, func(key []byte, flags stringFlags, i int) int {
		var end int
		var f wireField
		switch {
		case !flags.plain():
			return -1
		case equalFoldASCII(key, "authentication.kubernetes.io/pod-name"):
			f = 1
			end, _ = u.Extra.PodName.read(b, i, 4)
		case equalFoldASCII(key, "authentication.kubernetes.io/pod-uid"):
			f = 2
			end, _ = u.Extra.PodUID.read(b, i, 4)
		case equalFoldASCII(key, "authentication.kubernetes.io/node-name"):
			f = 3
			end, _ = u.Extra.NodeName.read(b, i, 4)
		default:
			return skipValue(b, i, 3)
		}
		if !seen.add(f) {
			return -1
		}
		return end
	})
}

// readObjectRef reads the objectRef object or null at b[start].
func readObjectRef(b []byte, start int, dst **wireObjectRef) int {
	if at(b, start) == 'n' {
		*dst = nil
		return scanLiteral(b, start, "null")
	}
	if at(b, start) != '{' {
		return -1
	}
	ref := new(wireObjectRef)
	*dst = ref
	var seen fieldSet
	return scanObject(b, start, 2, func(key []byte, flags stringFlags, i int) int {
		var read func([]byte, int) int
		var f wireField
		switch {
		case !flags.plain():
			return -1
		case equalFoldASCII(key, "resource"):
			read, f = ref.Resource.read, 1
		case equalFoldASCII(key, "apigroup"):
			read, f = ref.APIGroup.read, 2
		case equalFoldASCII(key, "apiversion"):
			read, f = ref.APIVersion.read, 3
		case equalFoldASCII(key, "subresource"):
			read, f = ref.Subresource.read, 4
		default:
			return skipValue(b, i, 2)
		}
		if !seen.add(f) {
			return -1
		}
		return read(b, i)
	})
}

// readResponseStatus reads the responseStatus object or null at b[start]
// into w, taking its code when it is an integer that fits an int32.
func readResponseStatus(b []byte, start int, w *wireEvent) int {
	if at(b, start) == 'n' {
		w.ResponseStatus = nil
		return scanLiteral(b, start, "null")
	}
	if at(b, start) != '{' {
		return -1
	}
	w.ResponseStatus = &struct {
		Code int32 `json:"code"`
	}{}
	seen := false
	return scanObject(b, start, 2, func(key []byte, flags stringFlags, i int) int {
		switch {
		case !flags.plain():
			return -1
		case !equalFoldASCII(key, "code"):
			return skipValue(b, i, 2)
		case seen:
			return -1
		}
		seen = true
		if at(b, i) == 'n' {
			return scanLiteral(b, i, "null")
		}
		end := scanNumber(b, i)
		if end < 0 {
			return -1
		}
		code, err := strconv.ParseInt(string(b[i:end]), 10, 32)
		if err != nil {
			// A fraction, an exponent or out of range: a type error,
			// which encoding/json words.
			return -1
		}
		w.ResponseStatus.Code = int32(code)
		return end
	})
}

// at is b[i], or 0 past its end, where a value was expected and the
// scanner will fail.
func at(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}
