package auditjson

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/catalog"
)

// Every field of an event is the sender's, and a webhook body may be 64
// MiB: one event could list 18 million source addresses. So every value
// the decoder keeps is bounded as it is read, on the scanner's path and on
// encoding/json's alike, and nothing is held whole first: the types below
// walk a list or an object where it lies in the input and keep only what
// fits their bound.
//
//	username, impersonatedBy            512 bytes (aggregate.MaxUsernameBytes)
//	userAgent                          1024 bytes (aggregate.MaxUserAgentBytes)
//	verb, stage                          63 bytes (aggregate.MaxVerbBytes)
//	pod name and node (user.extra)      253 bytes, the first of each list
//	objectRef parts                     their bound and one character more, so
//	                                    that the aggregator still refuses them
//	                                    as too long (aggregate.ResultTooLong)
//	sourceIPs                           aggregate.MaxSourceIPs entries: the first
//	                                    forwarded ones (of the first 64) and the
//	                                    last (the address the apiserver saw
//	                                    itself), each an IP address (net/netip)
//	                                    of at most 64 bytes
//	k8s.io/deprecated                   only whether it is "true"
//	k8s.io/removed-release              a release (catalog.ParseRelease) of at most
//	                                    aggregate.MaxReleaseBytes, kept as "1.37"
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
//	auditID                             aggregate.MaxIDBytes; a longer one is
//	                                    its digest, as the store would keep
//	                                    it (store.MarkID), hashed where it lies
//
// The auditID is never cut: it is the request's identity, which cutting
// could merge with another's. The request object is read where it lies
// and copied only for the events whose field rules read it, and only
// from an item within the stream's item bound (maxItemBytes).
//
// What is left out is noted on the event (aggregate.Event.Dropped) and
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
func (usernameLimit) bytes() int  { return aggregate.MaxUsernameBytes }
func (userAgentLimit) bytes() int { return aggregate.MaxUserAgentBytes }
func (wordLimit) bytes() int      { return aggregate.MaxVerbBytes }
func (nameLimit) bytes() int      { return aggregate.MaxNodeBytes }

// The parts of an API name keep one character past their bound: the
// aggregator refuses a longer part as too long rather than shorten it,
// which could merge it with another API's counts.
func (groupLimit) bytes() int    { return aggregate.MaxGroupBytes + utf8.UTFMax }
func (versionLimit) bytes() int  { return aggregate.MaxVersionBytes + utf8.UTFMax }
func (resourceLimit) bytes() int { return aggregate.MaxResourceBytes + utf8.UTFMax }
func (subresLimit) bytes() int   { return aggregate.MaxSubresourceBytes + utf8.UTFMax }

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
// aggregate.MaxIDBytes as it is, else its digest (store.MarkID), so that
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
	s, end, cut := boundedString(b, start, aggregate.MaxIDBytes)
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
// aggregate.MaxSourceIPs addresses, the first forwarded ones and the last
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
			if len(s.ips) < aggregate.MaxSourceIPs-1 && index <= maxForwarded {
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

// stringIs reports whether the string or null at b[start] is want, and
// returns the offset after it, or -1. It allocates nothing.
func stringIs(b []byte, start int, want string) (int, bool) {
	if at(b, start) == 'n' {
		return scanLiteral(b, start, "null"), want == ""
	}
	if at(b, start) != '"' {
		return -1, false
	}
	end, flags := scanString(b, start)
	if end < 0 {
		return -1, false
	}
	raw := b[start+1 : end-1]
	if flags.plain() || len(raw) > 6*len(want)+6 {
		return end, string(raw) == want
	}
	var buf [16]byte
	v, cut := unquote(buf[:0], raw, len(want))
	return end, !cut && string(v) == want
}

// stringArray walks the array of strings or null at b[start], depth
// counting it and the containers around it, and hands element each
// element's index and start; element returns the offset after it. An
// element that is not a string or null ends the walk with the type error
// encoding/json would give, and so does a value that is not an array or
// null. It returns the offset after the value, or -1.
func stringArray(b []byte, start, depth int, element func(index, start int) int) (int, error) {
	switch at(b, start) {
	case 'n':
		return scanLiteral(b, start, "null"), nil
	case '[':
	default:
		return -1, typeError(b[start:], sliceType)
	}
	var err error
	n := 0
	end := scanArray(b, start, depth, func(i int) int {
		if c := at(b, i); c != '"' && c != 'n' {
			err = typeError(b[i:], stringType)
			return -1
		}
		n++
		return element(n-1, i)
	})
	return end, err
}

// unmarshalArray is UnmarshalJSON by read: b is valid JSON, which
// encoding/json has checked.
func unmarshalArray(b []byte, read func(b []byte, start, depth int) (int, error)) error {
	end, err := read(b, 0, 1)
	if err != nil {
		return err
	}
	return scanned(end)
}

// errScanner is the error of a value encoding/json accepted and the
// scanner did not: FuzzScanner holds them to agree.
var errScanner = errors.New("auditjson: the scanner refused a valid JSON value")

// scanned is the error of an UnmarshalJSON that walked its value to end.
func scanned(end int) error {
	if end < 0 {
		return errScanner
	}
	return nil
}

var (
	stringType = reflect.TypeFor[string]()
	sliceType  = reflect.TypeFor[[]string]()
	mapType    = reflect.TypeFor[map[string]json.RawMessage]()
)

// typeError is encoding/json's error for the value b decoded into t.
func typeError(b []byte, t reflect.Type) error {
	value := "number"
	switch at(b, 0) {
	case '"':
		value = "string"
	case '{':
		value = "object"
	case '[':
		value = "array"
	case 't', 'f':
		value = "bool"
	}
	return &json.UnmarshalTypeError{Value: value, Type: t}
}

// boundedString decodes the JSON string at b[start] as encoding/json
// would, keeping at most max bytes of it, cut at a character boundary,
// and returns the offset after it (-1 if there is none) and whether it
// was cut. Only what is kept is ever copied.
func boundedString(b []byte, start, max int) (s string, end int, cut bool) {
	if at(b, start) != '"' {
		return "", -1, false
	}
	end, flags := scanString(b, start)
	if end < 0 {
		return "", -1, false
	}
	raw := b[start+1 : end-1]
	if flags&flagEscaped == 0 && (flags&flagNonASCII == 0 || utf8.Valid(raw)) {
		// Its bytes are its value.
		if len(raw) <= max {
			return intern(raw), end, false
		}
		n := max
		for n > 0 && !utf8.RuneStart(raw[n]) {
			n--
		}
		return string(raw[:n]), end, true
	}
	v, cut := unquote(make([]byte, 0, min(len(raw), max+utf8.UTFMax)), raw, max)
	if cut {
		return aggregate.Truncate(string(v), max), end, true
	}
	return string(v), end, false
}

// unquote appends to dst the value of the JSON string whose content (the
// bytes between its quotes, valid as scanString checks) is s, as
// encoding/json decodes it: escapes resolved, invalid UTF-8 and lone
// surrogates replaced by U+FFFD. It stops once more than max bytes are
// appended, and says so (cut).
func unquote(dst, s []byte, max int) (_ []byte, cut bool) {
	base := len(dst)
	for r := 0; r < len(s) && len(dst)-base <= max; {
		switch c := s[r]; {
		case c == '\\' && r+1 < len(s):
			switch s[r+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						dst = utf8.AppendRune(dst, dec)
						r += 6
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default:
				// '"', '\\' and '/' stand for themselves.
				dst = append(dst, s[r+1])
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst, len(dst)-base > max
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// annotationValues is what the decoder keeps of an event's annotations:
// whether k8s.io/deprecated is "true", k8s.io/removed-release when it is
// a release, and what was left out.
type annotationValues struct {
	deprecated     bool
	removedRelease string
	dropped        aggregate.Dropped
}

// decodeAnnotations reads the annotations object or null at b[start], depth
// counting it and the containers around it, into a, and the admission
// webhook annotations into webhooks when it is not nil. Annotations are a
// map in the audit types: keys match exactly, after unescaping, and the
// last of repeated keys wins. Only the two deprecation annotations and
// the webhook ones are decoded, each within its bound; every other value
// is skipped where it lies. It returns the offset after the value, or -1,
// with encoding/json's error when a value is of another type.
func decodeAnnotations(b []byte, start, depth int, a *annotationValues, webhooks *webhookAnnotations) (int, error) {
	switch at(b, start) {
	case 'n':
		return scanLiteral(b, start, "null"), nil
	case '{':
	default:
		return -1, typeError(b[start:], mapType)
	}
	deprecated, removed := -1, -1
	var scratch [maxKeyBytes + utf8.UTFMax]byte
	end := scanObject(b, start, depth, func(key []byte, flags stringFlags, i int) int {
		end := skipValue(b, i, depth)
		if end < 0 {
			return -1
		}
		if !flags.plain() {
			var cut bool
			if key, cut = unquote(scratch[:0], key, maxKeyBytes); cut {
				// Too long to be a key that is read.
				return end
			}
		}
		switch string(key) {
		case AnnotationDeprecated:
			deprecated = i
		case AnnotationRemovedRelease:
			removed = i
		default:
			if webhooks != nil && webhookKey(key) {
				webhooks.add(key, b[i:end], &a.dropped)
			}
		}
		return end
	})
	if end < 0 {
		return -1, nil
	}
	if deprecated >= 0 {
		switch at(b, deprecated) {
		case 'n':
		case '"':
			_, a.deprecated = stringIs(b, deprecated, "true")
		default:
			return -1, typeError(b[deprecated:], stringType)
		}
	}
	if removed >= 0 {
		switch at(b, removed) {
		case 'n':
		case '"':
			a.removedRelease = ""
			s, _, cut := boundedString(b, removed, aggregate.MaxReleaseBytes)
			if s == "" && !cut {
				break
			}
			r, err := catalog.ParseRelease(s)
			if cut || err != nil {
				a.dropped |= aggregate.DroppedRemovedRelease
				break
			}
			a.removedRelease = r.String()
		default:
			return -1, typeError(b[removed:], stringType)
		}
	}
	return end, nil
}

// webhookKey reports whether admission.Parse reads the annotation key.
func webhookKey(key []byte) bool {
	if string(key) == admission.MutatingLatencyKey || string(key) == admission.ValidatingLatencyKey {
		return true
	}
	for _, p := range [...]string{admission.MutationPrefix, admission.FailedOpenMutationPrefix,
		admission.FailedOpenValidatingPrefix, admission.InsecureSHA1Prefix, admission.MissingSANPrefix} {
		if len(key) >= len(p) && string(key[:len(p)]) == p {
			return true
		}
	}
	return false
}

// webhookAnnotations are the admission webhook annotations of an event,
// raw, by key: at most maxWebhookAnnotations, each value at most
// maxWebhookValueBytes. A repeated key allocates nothing again.
type webhookAnnotations struct {
	m map[string]*json.RawMessage
}

// add records the annotation key, whose value is raw; the last of
// repeated keys wins.
func (w *webhookAnnotations) add(key, raw []byte, dropped *aggregate.Dropped) {
	if len(raw) > maxWebhookValueBytes {
		*dropped |= aggregate.DroppedOverBound
		// Read as a value of its type that no webhook annotation has.
		if raw[0] == '"' {
			raw = []byte(`""`)
		} else {
			raw = []byte(`0`)
		}
	}
	if v, ok := w.m[string(key)]; ok {
		*v = append((*v)[:0], raw...)
		return
	}
	if len(w.m) >= maxWebhookAnnotations {
		*dropped |= aggregate.DroppedOverBound
		return
	}
	if w.m == nil {
		w.m = make(map[string]*json.RawMessage, 4)
	}
	v := append(json.RawMessage(nil), raw...)
	w.m[string(key)] = &v
}

// raw is the annotations as admission.Parse reads them.
func (w *webhookAnnotations) raw() map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(w.m))
	for k, v := range w.m {
		m[k] = *v
	}
	return m
}
