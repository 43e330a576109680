package auditjson

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
)

// DecodeStream decodes a body as DecodeBody does, reading it from r as it
// goes. The items of an EventList whose kind and apiVersion come first, as
// kube-apiserver sends them, are decoded one at a time, so that a large
// batch is never held whole: only its events are, each without its request
// object unless keep asks for it (nil keeps none). Any other body is read
// whole and handed to DecodeBody.
//
// A *Error means the body is unusable; any other error is r's, such as
// *http.MaxBytesError.
func DecodeStream(r io.Reader, keep func(*aggregate.Event) bool) ([]aggregate.Event, []ItemError, error) {
	rec := &recorder{r: r}
	dec := json.NewDecoder(rec)
	events, bad, streamed, err := streamList(dec, rec, keep)
	if streamed {
		return events, bad, err
	}
	// Not a list that can be streamed: read the rest, and decode the whole.
	if _, err := io.ReadAll(rec); err != nil {
		return nil, nil, err
	}
	if events, bad, err = DecodeBody(rec.buf); err != nil {
		return nil, nil, err
	}
	for i := range events {
		dropRequestObject(&events[i], keep)
	}
	return events, bad, nil
}

// maxWholeBody is the largest body DecodeStreamFiltered reads whole, for
// the prefilter: a batch of 400 Metadata events is about half a megabyte.
// Larger bodies (Request level and above) are streamed, never held whole.
const maxWholeBody = 4 << 20

// bodies holds buffers for bodies read whole, so that a steady stream of
// batches does not allocate one each.
var bodies = sync.Pool{New: func() any { return new([]byte) }}

// DecodeStreamFiltered is DecodeStream with the events that p sets aside
// left undecoded and tallied in skipped. A body of up to maxWholeBody is
// read whole and walked once (DecodeBodyFiltered); a larger one is
// streamed by DecodeStream, without the prefilter. A nil p sets nothing
// aside.
func DecodeStreamFiltered(r io.Reader, keep func(*aggregate.Event) bool, p *Prefilter) (events []aggregate.Event, bad []ItemError, skipped aggregate.Prefiltered, err error) {
	if p == nil {
		events, bad, err = DecodeStream(r, keep)
		return events, bad, skipped, err
	}
	buf := bodies.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxWholeBody+bytes.MinRead {
			bodies.Put(buf)
		}
	}()
	body, whole, err := readAtMost((*buf)[:0], r, maxWholeBody)
	*buf = body
	if err != nil {
		return nil, nil, skipped, err
	}
	if !whole {
		events, bad, err = DecodeStream(io.MultiReader(bytes.NewReader(body), r), keep)
		return events, bad, skipped, err
	}
	// Decoded events share nothing with body, which is reused.
	if events, bad, skipped, err = DecodeBodyFiltered(body, p); err != nil {
		return nil, nil, skipped, err
	}
	for i := range events {
		dropRequestObject(&events[i], keep)
	}
	return events, bad, skipped, nil
}

// readAtMost appends r's content to b until EOF (whole) or until b holds
// limit bytes, whichever comes first.
func readAtMost(b []byte, r io.Reader, limit int) (_ []byte, whole bool, err error) {
	for len(b) < limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):min(cap(b), limit)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, true, nil
		}
		if err != nil {
			return b, false, err
		}
	}
	return b, false, nil
}

func dropRequestObject(ev *aggregate.Event, keep func(*aggregate.Event) bool) {
	if keep == nil || !keep(ev) {
		ev.RequestObject = nil
	}
}

// streamList reads an EventList's envelope up to its items and streams them.
// streamed is false, with rec still recording, when the body is anything
// else or goes wrong before the items: DecodeBody then says what.
func streamList(dec *json.Decoder, rec *recorder, keep func(*aggregate.Event) bool) (events []aggregate.Event, bad []ItemError, streamed bool, err error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false, nil
	}
	var kind, apiVersion string
	// An envelope problem after the items is told once the body is known
	// to be JSON, as DecodeBody would.
	var pending error
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false, nil
		}
		switch key := tok.(string); {
		case key == "kind" && !streamed:
			if dec.Decode(&kind) != nil {
				return nil, nil, false, nil
			}
		case key == "apiVersion" && !streamed:
			if dec.Decode(&apiVersion) != nil {
				return nil, nil, false, nil
			}
		case key == "items" && !streamed && kind == KindEventList && apiVersion == APIVersion:
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return nil, nil, false, nil
			}
			// From here on nothing is kept but the events.
			rec.discardBefore(dec.InputOffset())
			streamed = true
			if events, bad, err = streamItems(dec, rec, keep); err != nil {
				return nil, nil, true, err
			}
		case !streamed && isEnvelopeKey(key):
			// "Kind" or "ITEMS": encoding/json matches keys regardless of
			// case; let it.
			return nil, nil, false, nil
		case strings.EqualFold(key, "items"):
			if err := dec.Decode(&json.RawMessage{}); err != nil {
				return nil, nil, true, streamError(dec, "after the items", err)
			}
			pending = cmp.Or(pending, error(&Error{ReasonMalformedJSON, "body has items twice"}))
		case strings.EqualFold(key, "kind") || strings.EqualFold(key, "apiVersion"):
			// Repeated after the items: encoding/json would let it win.
			var value string
			if err := dec.Decode(&value); err != nil {
				return nil, nil, true, streamError(dec, "after the items", err)
			}
			k, v := kind, apiVersion
			if strings.EqualFold(key, "kind") {
				k = value
			} else {
				v = value
			}
			if k != kind || v != apiVersion {
				err := error(&Error{ReasonWrongKind, fmt.Sprintf("body has %s twice, with different values", key)})
				if e := envelopeError(k, v); e != nil {
					err = e
				}
				pending = cmp.Or(pending, err)
			}
		default:
			if err := dec.Decode(&json.RawMessage{}); err != nil {
				if !streamed {
					return nil, nil, false, nil
				}
				return nil, nil, true, streamError(dec, "after the items", err)
			}
		}
	}
	if !streamed {
		return nil, nil, false, nil
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, true, streamError(dec, "after the items", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, nil, true, &Error{ReasonMalformedJSON, fmt.Sprintf("body is not valid JSON: data after the top-level object, at byte %d", dec.InputOffset())}
		}
		return nil, nil, true, streamError(dec, "after the items", err)
	}
	if pending != nil {
		return nil, nil, true, pending
	}
	return events, bad, true, nil
}

func isEnvelopeKey(key string) bool {
	return strings.EqualFold(key, "kind") || strings.EqualFold(key, "apiVersion") || strings.EqualFold(key, "items")
}

// streamItems decodes the items of a list, the opening bracket read. Each
// item is decoded straight from the stream; its bytes, which the dedupe
// digest of an event without an auditID needs, are sliced from what rec
// kept, so nothing is scanned twice.
func streamItems(dec *json.Decoder, rec *recorder, keep func(*aggregate.Event) bool) ([]aggregate.Event, []ItemError, error) {
	var events []aggregate.Event
	var bad []ItemError
	for i := 0; dec.More(); i++ {
		start := dec.InputOffset()
		var w wireEvent
		err := dec.Decode(&w)
		var te *json.UnmarshalTypeError
		if err != nil && !errors.As(err, &te) {
			return nil, nil, streamError(dec, fmt.Sprintf("in item %d", i), err)
		}
		// Between the previous value and this one: a comma and spaces.
		raw := bytes.TrimLeft(rec.slice(start, dec.InputOffset()), ", \t\r\n")
		var ev aggregate.Event
		switch {
		case err != nil:
			// Decoded again on its own, for the same message as an
			// item of a list decoded whole.
			_, err = DecodeEvent(raw)
		case admission.MayHave(raw):
			// Only events with admission webhook annotations pay for
			// reading them, as in DecodeBody.
			ev, err = DecodeEvent(raw)
		default:
			ev, err = convert(&w, raw)
		}
		rec.discardBefore(dec.InputOffset())
		if err != nil {
			var e *Error
			errors.As(err, &e)
			bad = append(bad, ItemError{Index: i, Err: e})
			continue
		}
		dropRequestObject(&ev, keep)
		events = append(events, ev)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, streamError(dec, "after the items", err)
	}
	return events, bad, nil
}

// streamError turns a decoder error into an *Error, or passes on the
// reader's own error. where says where in the body the decoder was (the
// offsets of the decoder's own syntax errors are not the body's).
func streamError(dec *json.Decoder, where string, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return &Error{ReasonMalformedJSON, fmt.Sprintf("body is not valid JSON %s: %s", where, se.Error())}
	case errors.As(err, &te):
		e := syntaxError("body", err)
		e.Reason = ReasonMalformedJSON
		return e
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Error{ReasonMalformedJSON, fmt.Sprintf("body is not valid JSON %s: unexpected end of JSON input", where)}
	default:
		return err
	}
}

// recorder keeps what is read through it: everything until the items of a
// list, then only what the decoder has not finished with.
type recorder struct {
	r   io.Reader
	buf []byte
	// base is the body offset of buf[0].
	base int64
}

func (c *recorder) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.buf = append(c.buf, p[:n]...)
	return n, err
}

// slice returns the body's bytes from start to end, which must be kept.
func (c *recorder) slice(start, end int64) []byte {
	return c.buf[start-c.base : end-c.base]
}

// discardBefore forgets the body before offset off. It moves the rest down
// only once the part forgotten is the larger, so that each byte is moved
// about once.
func (c *recorder) discardBefore(off int64) {
	if drop := int(off - c.base); drop > len(c.buf)/2 {
		n := copy(c.buf, c.buf[drop:])
		c.buf, c.base = c.buf[:n], off
	}
}
