package auditjson

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/kube-sunset/sunset/countkey"
)

// Every field of an event is the sender's, and a webhook body may be 64
// MiB: one event could list 18 million source addresses. So every value
// the decoder keeps is bounded as it is read, on the scanner's path and on
// encoding/json's alike, and nothing is held whole first: the types below
// walk a list or an object where it lies in the input and keep only what
// fits their bound.
//
//	username, impersonatedBy            512 bytes (countkey.MaxUsernameBytes)
//	userAgent                          1024 bytes (countkey.MaxUserAgentBytes)
//	verb, stage                          63 bytes (countkey.MaxVerbBytes)
//	pod name and node (user.extra)      253 bytes, the first of each list
//	objectRef parts                     their bound and one character more, so
//	                                    that the aggregator still refuses them
//	                                    as too long (classify.ResultTooLong)
//	sourceIPs                           countkey.MaxSourceIPs entries: the first
//	                                    forwarded ones (of the first 64) and the
//	                                    last (the address the apiserver saw
//	                                    itself), each an IP address (net/netip)
//	                                    of at most 64 bytes
//	k8s.io/deprecated                   only whether it is "true"
//	k8s.io/removed-release              a release (catalog.ParseRelease) of at most
//	                                    countkey.MaxReleaseBytes, kept as "1.37"
//	admission webhook annotations       maxWebhookAnnotations per event, each
//	                                    value maxWebhookValueBytes
//	other annotations, user.groups,     not decoded at all
//	other user.extra keys
//
//	requestURI                         maxURIBytes (8 KiB), cut back to the
//	                                    last whole query parameter: only its
//	                                    dryRun parameter is read
//	timestamps                           64 bytes; a longer one is no RFC 3339
//	                                    time (bad_timestamp)
//	kind, apiVersion of an event         63 bytes
//	auditID                             countkey.MaxIDBytes; a longer one is
//	                                    its digest, as the store would keep
//	                                    it (countkey.MarkID), hashed where it lies
//
// The auditID is never cut: it is the request's identity, which cutting
// could merge with another's. The request object is read where it lies
// and copied only for the events whose field rules read it, and only
// from an item within the stream's item bound (maxItemBytes).
//
// What is left out is noted on the event (classify.Event.Dropped) and
// counted once per event and reason by the aggregator.
const (
	// maxIPBytes is far above the longest IPv6 address with a zone a
	// host could have.
	maxIPBytes = 64
	// maxForwarded is how many forwarded sourceIPs entries are looked at
	// for the addresses kept: kube-apiserver lists only addresses, and a
	// real X-Forwarded-For chain is a few hops.
	maxForwarded = 64
	// maxWebhookAnnotations bounds the admission webhook annotations of
	// one event: admission.Parse keeps at most 256 calls and 64 hosts.
	maxWebhookAnnotations = 1024
	// maxWebhookValueBytes bounds one webhook annotation's value as
	// written (kube-apiserver's longest, a mutation's, is under 600
	// bytes). A longer one is read as an empty string: admission.Parse
	// finds it invalid, as a name or duration that long would be.
	maxWebhookValueBytes = 4096
	// maxKeyBytes is the longest annotation key worth decoding: a webhook
	// annotation's key is a prefix and a name of at most 253 bytes.
	maxKeyBytes = 512
)

// limit is the bound of a text field, as a type.
type limit interface{ bytes() int }

// maxURIBytes bounds a requestURI: far more than the path and the
// dryRun query parameter take, which is all of it that is read.
const maxURIBytes = 8 << 10

// maxTimeBytes bounds a timestamp: an RFC 3339 time with nanoseconds and
// an offset is 35 bytes.
const maxTimeBytes = 64

type (
	uriLimit       struct{}
	timeLimit      struct{}
	usernameLimit  struct{}
	userAgentLimit struct{}
	wordLimit      struct{}
	nameLimit      struct{}
	groupLimit     struct{}
	versionLimit   struct{}
	resourceLimit  struct{}
	subresLimit    struct{}
)

func (uriLimit) bytes() int       { return maxURIBytes }
func (timeLimit) bytes() int      { return maxTimeBytes }
func (usernameLimit) bytes() int  { return countkey.MaxUsernameBytes }
func (userAgentLimit) bytes() int { return countkey.MaxUserAgentBytes }
func (wordLimit) bytes() int      { return countkey.MaxVerbBytes }
func (nameLimit) bytes() int      { return countkey.MaxNodeBytes }

// The parts of an API name keep one character past their bound: the
// aggregator refuses a longer part as too long rather than shorten it,
// which could merge it with another API's counts.
func (groupLimit) bytes() int    { return countkey.MaxGroupBytes + utf8.UTFMax }
func (versionLimit) bytes() int  { return countkey.MaxVersionBytes + utf8.UTFMax }
func (resourceLimit) bytes() int { return countkey.MaxResourceBytes + utf8.UTFMax }
func (subresLimit) bytes() int   { return countkey.MaxSubresourceBytes + utf8.UTFMax }

// text is a JSON string kept to at most L's bytes, cut at a character
// boundary; cut says it was longer. null leaves it as it was, as with a
// string.
type text[L limit] struct {
	s   string
	cut bool
}

func (t *text[L]) UnmarshalJSON(b []byte) error {
	if b[0] != '"' && b[0] != 'n' {
		return typeError(b, stringType)
	}
	return scanned(t.read(b, 0))
}

// read reads the string or null at b[start], as UnmarshalJSON does, and
// returns the offset after it, or -1 for any other value.
func (t *text[L]) read(b []byte, start int) int {
	if at(b, start) == 'n' {
		return scanLiteral(b, start, "null")
	}
	var l L
	s, end, cut := boundedString(b, start, l.bytes())
	if end >= 0 {
		t.s, t.cut = s, cut
	}
	return end
}

// boundedURI is a requestURI as dryRun reads it: a URI cut at its bound
// loses the query parameter it was cut in, which would otherwise be an
// invalid escape or a different value, and so keeps the whole ones.
func boundedURI(t text[uriLimit]) string {
	if !t.cut {
		return t.s
	}
	if q := strings.IndexByte(t.s, '?'); q >= 0 {
		if amp := strings.LastIndexByte(t.s, '&'); amp > q {
			return t.s[:amp]
		}
		return t.s[:q]
	}
	return t.s
}

// auditID is an event's auditID as its dedupe mark holds it: up to
// countkey.MaxIDBytes as it is, else its digest (countkey.MarkID), so that
// an ID as long as the body is never copied. null leaves it as it was,
// as with a string.
type auditID struct {
	s string
}

func (a *auditID) UnmarshalJSON(b []byte) error {
	if b[0] != '"' && b[0] != 'n' {
		return typeError(b, stringType)
	}
	return scanned(a.read(b, 0))
}

// read reads the string or null at b[start] and returns the offset after
// it, or -1 for any other value.
func (a *auditID) read(b []byte, start int) int {
	if at(b, start) == 'n' {
		return scanLiteral(b, start, "null")
	}
	s, end, cut := boundedString(b, start, countkey.MaxIDBytes)
	if end < 0 {
		return -1
	}
	if !cut {
		a.s = s
		return end
	}
	raw := b[start+1 : end-1]
	h := sha256.New()
	if _, flags := scanString(b, start); flags&flagEscaped == 0 && (flags&flagNonASCII == 0 || utf8.Valid(raw)) {
		h.Write(raw)
	} else {
		// Escaped: its value, decoded once and dropped. An invalid
		// byte decodes to three.
		v, _ := unquote(make([]byte, 0, len(raw)), raw, 3*len(raw))
		h.Write(v)
	}
	a.s = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return end
}

// rawValue is a JSON value where it lies in the input, kept without a
// copy: the caller copies what it keeps (json.RawMessage would copy every
// one, up to the size of the body).
type rawValue []byte

func (r *rawValue) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// firstText is a JSON array of strings of which only the first is kept,
// as text; the others are checked for their type and never decoded. null
// empties it, as it does a slice, and so does a null first element.
type firstText[L limit] struct {
	text[L]
}

func (t *firstText[L]) UnmarshalJSON(b []byte) error { return unmarshalArray(b, t.read) }

// read reads the array or null at b[start], depth counting it and the
// containers around it, and returns the offset after it, or -1 with
// encoding/json's error when the value is of another type.
func (t *firstText[L]) read(b []byte, start, depth int) (int, error) {
	*t = firstText[L]{}
	return stringArray(b, start, depth, func(index, i int) int {
		if index > 0 || at(b, i) == 'n' {
			return skipValue(b, i, depth)
		}
		return t.text.read(b, i)
	})
}

// stringsOnly is a JSON array of strings that is checked for its type
// and not kept.
type stringsOnly struct{}

func (s *stringsOnly) UnmarshalJSON(b []byte) error { return unmarshalArray(b, s.read) }

func (*stringsOnly) read(b []byte, start, depth int) (int, error) {
	return stringArray(b, start, depth, func(_, i int) int { return skipValue(b, i, depth) })
}

// sourceIPs is an event's sourceIPs as Sunset keeps them: at most
// countkey.MaxSourceIPs addresses, the first forwarded ones and the last
// (the address the apiserver saw itself), each one that parses as an IP
// address. The others are never decoded; invalid and cut say that some
// were left out.
type sourceIPs struct {
	ips []string
	// invalid is set when an entry was not an IP address, cut when there
	// were more entries than are kept.
	invalid, cut bool
}

func (s *sourceIPs) UnmarshalJSON(b []byte) error { return unmarshalArray(b, s.read) }

// read reads the array or null at b[start], as UnmarshalJSON does: null
// makes it nil, an array non-nil.
func (s *sourceIPs) read(b []byte, start, depth int) (int, error) {
	*s = sourceIPs{}
	if at(b, start) == '[' {
		s.ips = []string{}
	}
	// Each entry is judged once the next one is seen: the last is kept
	// whatever came before it.
	pending := -1
	end, err := stringArray(b, start, depth, func(index, i int) int {
		end := skipValue(b, i, depth)
		if end >= 0 && pending >= 0 {
			// The forwarded entry before this one. Only the first
			// maxForwarded are looked at, so that a list of millions of
			// non-addresses costs a scan, not a parse each.
			if len(s.ips) < countkey.MaxSourceIPs-1 && index <= maxForwarded {
				s.add(b, pending)
			} else {
				s.cut = true
			}
		}
		pending = i
		return end
	})
	if end >= 0 && pending >= 0 {
		s.add(b, pending)
	}
	return end, err
}

// add keeps the entry at b[i], a string or null, if it is an IP address.
func (s *sourceIPs) add(b []byte, i int) {
	if ip, ok := ipAt(b, i); ok {
		s.ips = append(s.ips, ip)
	} else {
		s.invalid = true
	}
}

// ipAt is the string at b[i] when it is an IP address. An entry too long
// to be one is never copied.
func ipAt(b []byte, i int) (string, bool) {
	if at(b, i) != '"' {
		return "", false
	}
	end, flags := scanString(b, i)
	raw := b[i+1 : end-1]
	if len(raw) == 0 || len(raw) > 6*maxIPBytes {
		return "", false
	}
	var buf [maxIPBytes + utf8.UTFMax]byte
	v := raw
	if !flags.plain() {
		var cut bool
		if v, cut = unquote(buf[:0], raw, maxIPBytes); cut {
			return "", false
		}
	}
	if len(v) > maxIPBytes {
		return "", false
	}
	ip := string(v)
	if _, err := netip.ParseAddr(ip); err != nil {
		return "", false
	}
	return ip, true
}

// dryRunAll reads a DeleteOptions' dryRun, a JSON array of strings, as
// whether it holds "All", without keeping it.
type dryRunAll bool

func (d *dryRunAll) UnmarshalJSON(b []byte) error {
	*d = false
	return unmarshalArray(b, func(b []byte, start, depth int) (int, error) {
		return stringArray(b, start, depth, func(_, i int) int {
			end, is := stringIs(b, i, "All")
			*d = *d || dryRunAll(is)
			return end
		})
	})
}
