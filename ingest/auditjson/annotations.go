package auditjson

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// annotationValues is what the decoder keeps of an event's annotations:
// whether k8s.io/deprecated is "true", k8s.io/removed-release when it is
// a release, and what was left out.
type annotationValues struct {
	deprecated     bool
	removedRelease string
	dropped        classify.Dropped
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
			s, _, cut := boundedString(b, removed, countkey.MaxReleaseBytes)
			if s == "" && !cut {
				break
			}
			r, err := catalog.ParseRelease(s)
			if cut || err != nil {
				a.dropped |= classify.DroppedRemovedRelease
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
func (w *webhookAnnotations) add(key, raw []byte, dropped *classify.Dropped) {
	if len(raw) > maxWebhookValueBytes {
		*dropped |= classify.DroppedOverBound
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
		*dropped |= classify.DroppedOverBound
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
