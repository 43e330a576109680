package auditjson

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/kube-sunset/sunset/classify"
)

// DecodeStream decodes a body as DecodeBody does, reading it from r as it
// goes. The items of an EventList whose kind and apiVersion come first, as
// kube-apiserver sends them, are decoded one at a time, so that a large
// batch is never held whole: only its events are, each without its request
// object unless keep asks for it (nil keeps none), and an item over
// maxItemBytes is skipped unread and tallied in bad (ReasonTooLarge). Any
// other body is read whole, up to maxWholeBody, and handed to DecodeBody;
// a longer one is refused (ReasonTooLarge).
//
// A *Error means the body is unusable; any other error is r's, such as
// *http.MaxBytesError.
func DecodeStream(r io.Reader, keep func(*classify.Event) bool) ([]classify.Event, Invalid, error) {
	return decodeStream(nil, r, keep)
}

func decodeStream(acct *Account, r io.Reader, keep func(*classify.Event) bool) ([]classify.Event, Invalid, error) {
	rec := &recorder{r: r, acct: acct}
	dec := json.NewDecoder(rec)
	events, bad, streamed, err := streamList(dec, rec, keep, acct)
	if streamed {
		return events, bad, err
	}
	// Not a list that can be streamed: read the rest, and decode the whole.
	// rec keeps what it reads, up to maxWholeBody.
	if _, err := io.Copy(io.Discard, rec); err != nil {
		if errors.Is(err, errNotStreamable) {
			return nil, Invalid{}, errBodyNotStreamable
		}
		return nil, Invalid{}, err
	}
	if events, bad, err = DecodeBody(rec.buf); err != nil {
		return nil, Invalid{}, err
	}
	if err := keepAndCharge(events, keep, acct); err != nil {
		return nil, Invalid{}, err
	}
	return events, bad, nil
}

// keepAndCharge drops the request objects keep does not ask for, and
// charges the events to acct.
func keepAndCharge(events []classify.Event, keep func(*classify.Event) bool, acct *Account) error {
	for i := range events {
		dropRequestObject(&events[i], keep)
		if err := acct.take(eventCost(&events[i])); err != nil {
			return err
		}
	}
	return nil
}

// errNotStreamable is the recorder's error past maxWholeBody.
var errNotStreamable = errors.New("auditjson: body too large to read whole")

// errBodyNotStreamable refuses a body over maxWholeBody that is not a list
// to stream.
var errBodyNotStreamable = &Error{ReasonTooLarge, fmt.Sprintf("body is over %d bytes and not an EventList whose kind and apiVersion come before its items, as kube-apiserver sends it; only such a list is read as it arrives", maxWholeBody)}

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
func DecodeStreamFiltered(r io.Reader, keep func(*classify.Event) bool, p *Prefilter) (events []classify.Event, bad Invalid, skipped classify.Prefiltered, err error) {
	return DecodeStreamWithin(nil, r, keep, p)
}

// DecodeStreamWithin is DecodeStreamFiltered with what the body holds
// (its buffers, the request objects kept and the events) drawn from acct's
// Budget as it grows: past it, the decode stops with ErrOverBudget or
// ErrBodyOverBudget. The events stay charged until acct is closed. A nil
// acct limits nothing.
func DecodeStreamWithin(acct *Account, r io.Reader, keep func(*classify.Event) bool, p *Prefilter) (events []classify.Event, bad Invalid, skipped classify.Prefiltered, err error) {
	if p == nil {
		events, bad, err = decodeStream(acct, r, keep)
		return events, bad, skipped, err
	}
	buf := bodies.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxWholeBody+bytes.MinRead {
			bodies.Put(buf)
		}
	}()
	if err := acct.take(int64(cap(*buf))); err != nil {
		return nil, Invalid{}, skipped, err
	}
	body, whole, err := readAtMost((*buf)[:0], r, maxWholeBody, acct)
	*buf = body
	if err != nil {
		return nil, Invalid{}, skipped, err
	}
	if !whole {
		events, bad, err = decodeStream(acct, io.MultiReader(bytes.NewReader(body), r), keep)
		return events, bad, skipped, err
	}
	// Decoded events share nothing with body, which is reused.
	if events, bad, skipped, err = DecodeBodyFiltered(body, p); err != nil {
		return nil, Invalid{}, skipped, err
	}
	if err := keepAndCharge(events, keep, acct); err != nil {
		return nil, Invalid{}, skipped, err
	}
	return events, bad, skipped, nil
}

// readAtMost appends r's content to b until EOF (whole) or until b holds
// limit bytes, whichever comes first; acct pays for b's growth.
func readAtMost(b []byte, r io.Reader, limit int, acct *Account) (_ []byte, whole bool, err error) {
	for len(b) < limit {
		if len(b) == cap(b) {
			// Doubling: append's smaller steps for large slices would
			// allocate five times the body on the way.
			old := cap(b)
			b = slices.Grow(b, max(len(b), bytes.MinRead))
			if err := acct.take(int64(cap(b) - old)); err != nil {
				return b, false, err
			}
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

func dropRequestObject(ev *classify.Event, keep func(*classify.Event) bool) {
	if keep == nil || !keep(ev) {
		ev.RequestObject = nil
	}
}

// streamList reads an EventList's envelope up to its items and streams them.
// streamed is false, with rec still recording, when the body is anything
// else or goes wrong before the items: DecodeBody then says what.
func streamList(dec *json.Decoder, rec *recorder, keep func(*classify.Event) bool, acct *Account) (events []classify.Event, bad Invalid, streamed bool, err error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, Invalid{}, false, nil
	}
	var kind, apiVersion string
	// An envelope problem after the items is told once the body is known
	// to be JSON, as DecodeBody would.
	var pending error
	// shift is the body offset of what dec reads from, once the items
	// are read.
	var shift int64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, Invalid{}, false, nil
		}
		switch key := tok.(string); {
		case key == "kind" && !streamed:
			if dec.Decode(&kind) != nil {
				return nil, Invalid{}, false, nil
			}
		case key == "apiVersion" && !streamed:
			if dec.Decode(&apiVersion) != nil {
				return nil, Invalid{}, false, nil
			}
		case key == "items" && !streamed && kind == KindEventList && apiVersion == APIVersion:
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return nil, Invalid{}, false, nil
			}
			// From here on nothing is kept but the events.
			streamed = true
			var tail *json.Decoder
			if events, bad, tail, shift, err = splitItems(dec, rec.r, keep, acct); err != nil {
				return nil, Invalid{}, true, err
			}
			dec = tail
		case !streamed && strings.EqualFold(key, "items"):
			// Items before the envelope: read whole by DecodeBody,
			// without the decoder holding them as well.
			return nil, Invalid{}, false, nil
		case !streamed && isEnvelopeKey(key):
			// "Kind" or "ITEMS": encoding/json matches keys regardless of
			// case; let it.
			return nil, Invalid{}, false, nil
		case strings.EqualFold(key, "items"):
			if err := dec.Decode(&discard{}); err != nil {
				return nil, Invalid{}, true, streamError(dec, "after the items", err)
			}
			pending = cmp.Or(pending, error(&Error{ReasonMalformedJSON, "body has items twice"}))
		case strings.EqualFold(key, "kind") || strings.EqualFold(key, "apiVersion"):
			// Repeated after the items: encoding/json would let it win.
			var value string
			if err := dec.Decode(&value); err != nil {
				return nil, Invalid{}, true, streamError(dec, "after the items", err)
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
			if err := dec.Decode(&discard{}); err != nil {
				if !streamed {
					return nil, Invalid{}, false, nil
				}
				return nil, Invalid{}, true, streamError(dec, "after the items", err)
			}
		}
	}
	if !streamed {
		return nil, Invalid{}, false, nil
	}
	if _, err := dec.Token(); err != nil {
		return nil, Invalid{}, true, streamError(dec, "after the items", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, Invalid{}, true, &Error{ReasonMalformedJSON, fmt.Sprintf("body is not valid JSON: data after the top-level object, at byte %d", dec.InputOffset()+shift)}
		}
		return nil, Invalid{}, true, streamError(dec, "after the items", err)
	}
	if pending != nil {
		return nil, Invalid{}, true, pending
	}
	return events, bad, true, nil
}

func isEnvelopeKey(key string) bool {
	return strings.EqualFold(key, "kind") || strings.EqualFold(key, "apiVersion") || strings.EqualFold(key, "items")
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

// recorder keeps what is read through it, up to maxWholeBody, so that a
// body that is not a list to stream can be handed to DecodeBody whole;
// past that it fails with errNotStreamable. A list's items are read from
// r directly, and not kept.
type recorder struct {
	r    io.Reader
	buf  []byte
	acct *Account
	err  error
}

func (c *recorder) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p[:min(len(p), maxWholeBody+1-len(c.buf))])
	if len(c.buf)+n > maxWholeBody {
		c.err = errNotStreamable
		return 0, c.err
	}
	if len(c.buf)+n > cap(c.buf) {
		// Doubling, as in readAtMost, up to the bound.
		old := cap(c.buf)
		c.buf = slices.Grow(c.buf, min(max(n, len(c.buf)), maxWholeBody-len(c.buf)))
		if e := c.acct.take(int64(cap(c.buf) - old)); e != nil {
			c.err = e
			return 0, e
		}
	}
	c.buf = append(c.buf, p[:n]...)
	return n, err
}

// discard is a JSON value read and not kept.
type discard struct{}

func (*discard) UnmarshalJSON([]byte) error { return nil }
