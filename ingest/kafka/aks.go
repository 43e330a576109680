package kafka

import (
	"bytes"

	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// Azure sends AKS audit events through Event Hubs as diagnostic records:
// {"records":[{"category":"kube-audit","properties":{"log":"<event>"}}]},
// each event escaped in a string.

// aksRecord is one record of an Azure diagnostic-settings envelope, as
// encoding/json decodes it.
type aksRecord struct {
	Category   string `json:"category"`
	Properties struct {
		Log string `json:"log"`
	} `json:"properties"`
}

// isAuditCategory reports whether a record of the category holds an audit
// event; other categories (kube-apiserver logs, guard) share the stream.
func isAuditCategory(category string) bool {
	return category == "" || category == "kube-audit" || category == "kube-audit-admin"
}

// addAKS adds one record's event, decoded by encoding/json.
func (d *decoder) addAKS(out *decoded, r aksRecord) {
	if isAuditCategory(r.Category) {
		d.addAKSEvent(out, []byte(r.Properties.Log))
	}
}

// addAKSEvent adds the event raw of an audit record.
func (d *decoder) addAKSEvent(out *decoded, raw []byte) {
	if res, skip := d.prefilter.Skip(raw); skip {
		out.skipped.Add(res)
		return
	}
	ev, err := auditjson.DecodeEvent(raw)
	if err != nil {
		out.invalid++
		return
	}
	out.events = append(out.events, ev)
}

// aksRecords reads the records array whose bracket is at value[start] as
// decoding it into []aksRecord and adding each with addAKS would, in one
// validating walk that unescapes only the audit records' events, into a
// reused buffer. ok is false when the records hold anything it does not
// read plainly (a null, a value of another type, an escaped, repeated or
// differently cased key, an event unquote declines): the caller then
// decodes them with encoding/json.
func (d *decoder) aksRecords(value []byte, start int) (out decoded, ok bool) {
	if value[start] != '[' {
		return decoded{}, false
	}
	buf := d.unquoted.Get().(*[]byte)
	defer d.unquoted.Put(buf)
	plain := true
	end := auditjson.WalkArray(value, start, 2, func(i int) int {
		r, end := readAKSRecord(value, i, (*buf)[:0])
		if !plain || !r.plain || end < 0 {
			plain = false
			return end
		}
		*buf = r.event[:0] // keep what it grew to
		if isAuditCategory(string(r.category.of(value))) {
			d.addAKSEvent(&out, r.event)
		}
		return end
	})
	return out, plain && end >= 0
}

// aksSpans is where a record's category lies (between its quotes), and
// its event, unescaped.
type aksSpans struct {
	category span
	event    []byte
	hasEvent bool
	// plain is false when the record holds something readAKSRecord
	// does not read as encoding/json would.
	plain bool
}

// readAKSRecord walks the record at b[i], an element of the records array,
// unescapes its event into dst as it steps over it, and returns the offset
// after the record.
func readAKSRecord(b []byte, i int, dst []byte) (aksSpans, int) {
	if b[i] != '{' {
		return aksSpans{}, auditjson.SkipValue(b, i, 2)
	}
	r := aksSpans{plain: true, event: dst}
	var category, properties bool
	end := auditjson.WalkObject(b, i, 3, func(key []byte, plain bool, start int) int {
		switch {
		case !plain:
			r.plain = false
		case string(key) == "properties" && !properties && b[start] == '{':
			properties = true
			return readAKSProperties(b, start, &r)
		case string(key) == "category" && !category && b[start] == '"':
			category = true
			end := auditjson.SkipValue(b, start, 3)
			if end > 0 {
				r.category = span{start + 1, end - 1}
				r.plain = r.plain && bytes.IndexByte(r.category.of(b), '\\') < 0
			}
			return end
		case auditjson.KeyFolds(key, "properties") || auditjson.KeyFolds(key, "category"):
			r.plain = false
		}
		return auditjson.SkipValue(b, start, 3)
	})
	r.plain = r.plain && r.hasEvent
	return r, end
}

// readAKSProperties walks a record's properties object at b[start] for its
// event. unquoteAt validates the event's string as it unescapes it; when it
// declines, the record is not plain and encoding/json has the last word.
func readAKSProperties(b []byte, start int, r *aksSpans) int {
	return auditjson.WalkObject(b, start, 4, func(key []byte, plain bool, start int) int {
		switch {
		case !plain:
			r.plain = false
		case string(key) == "log" && !r.hasEvent && b[start] == '"':
			var end int
			var ok bool
			r.hasEvent = true
			r.event, end, ok = unquoteAt(r.event, b, start)
			r.plain = r.plain && ok
			if !ok {
				return auditjson.SkipValue(b, start, 4)
			}
			return end
		case auditjson.KeyFolds(key, "log"):
			r.plain = false
		}
		return auditjson.SkipValue(b, start, 4)
	})
}
