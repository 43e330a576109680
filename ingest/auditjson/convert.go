package auditjson

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/classify"
)

// APIVersionV1beta1 is the audit version of apiservers before 1.24. Its
// Event has every field Sunset reads under the same names, so single events
// (log lines, list items) in v1beta1 are read as v1. Whole webhook bodies
// must still be v1: kube-apiserver sends nothing else today.
const APIVersionV1beta1 = "audit.k8s.io/v1beta1"

// convert checks a decoded event and keeps what Sunset counts by. raw may be
// nil when the event has an auditID; without one, its digest is the ID.
func convert(w *wireEvent, raw []byte) (classify.Event, error) {
	// Items of an EventList carry no kind or apiVersion; a standalone event
	// (a log line, a Kafka message) does.
	if v := w.APIVersion.s; v != "" && v != APIVersion && v != APIVersionV1beta1 {
		return classify.Event{}, &Error{ReasonWrongAPIVersion, fmt.Sprintf("event apiVersion %q is not supported; want %q or %q", bounded(v), APIVersion, APIVersionV1beta1)}
	}
	if k := w.Kind.s; k != "" && k != KindEvent {
		return classify.Event{}, &Error{ReasonWrongKind, fmt.Sprintf("event kind %q is not supported; want %q", bounded(k), KindEvent)}
	}
	if w.Stage.s == "" {
		return classify.Event{}, &Error{ReasonMissingStage, "event has no stage"}
	}
	// A request made as another user counts under that user, with that
	// user's pod-bound token claims; the real caller is kept beside it.
	as, impersonatedBy := &w.User, ""
	if w.ImpersonatedUser != nil && w.ImpersonatedUser.Username.s != "" {
		as, impersonatedBy = w.ImpersonatedUser, w.User.Username.s
	}
	ev := classify.Event{
		ID:             w.AuditID.s,
		Stage:          w.Stage.s,
		Verb:           w.Verb.s,
		Username:       as.Username.s,
		ImpersonatedBy: impersonatedBy,
		UserAgent:      w.UserAgent.s,
		PodName:        as.Extra.PodName.s,
		PodNode:        as.Extra.NodeName.s,
		SourceIPs:      w.SourceIPs.ips,
		RequestObject:  w.RequestObject,
		Dropped:        w.Annotations.dropped,
	}
	if w.SourceIPs.invalid {
		ev.Dropped |= classify.DroppedSourceIP
	}
	if w.SourceIPs.cut || w.Stage.cut || w.Verb.cut || as.Username.cut || impersonatedBy != "" && w.User.Username.cut ||
		w.UserAgent.cut || as.Extra.PodName.cut || as.Extra.NodeName.cut || w.RequestURI.cut {
		ev.Dropped |= classify.DroppedOverBound
	}
	ev.DryRun = dryRun(boundedURI(w.RequestURI), ev.Verb, w.RequestObject)
	if ev.ID == "" {
		if raw == nil {
			return classify.Event{}, errNeedRaw
		}
		// Re-sent events are byte-identical, so a digest deduplicates them.
		ev.ID = digestID(raw)
	}
	if w.ObjectRef != nil {
		// A part cut at its bound is still longer than the aggregator
		// allows, which refuses it (too_long).
		ev.ObjectRef = &classify.ObjectRef{
			Group:       w.ObjectRef.APIGroup.s,
			Version:     w.ObjectRef.APIVersion.s,
			Resource:    w.ObjectRef.Resource.s,
			Subresource: w.ObjectRef.Subresource.s,
		}
	}
	if w.ResponseStatus != nil {
		ev.ResponseCode = w.ResponseStatus.Code
	}
	ev.Deprecated = w.Annotations.deprecated
	ev.RemovedRelease = w.Annotations.removedRelease
	var err error
	if ev.RequestReceived, err = parseBoundedTime(w.RequestReceivedTimestamp); err != nil {
		return classify.Event{}, &Error{ReasonBadTimestamp, "requestReceivedTimestamp is not an RFC 3339 time"}
	}
	if ev.StageTime, err = parseBoundedTime(w.StageTimestamp); err != nil {
		return classify.Event{}, &Error{ReasonBadTimestamp, "stageTimestamp is not an RFC 3339 time"}
	}
	if ev.IdentityTime, err = parseBoundedTime(w.IdentityTimestamp); err != nil {
		return classify.Event{}, &Error{ReasonBadTimestamp, fieldIdentity + " is not an RFC 3339 time"}
	}
	return ev, nil
}

// digestID identifies an event without auditID by its bytes.
func digestID(raw []byte) string {
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// dryRun reports a server-side dry run: dryRun=All in the request URI, or,
// for a DELETE logged at Request level or above, in its DeleteOptions body.
// A dry-run DELETE logged at Metadata level looks like a real one.
func dryRun(uri, verb string, requestObject []byte) bool {
	if _, query, ok := strings.Cut(uri, "?"); ok && strings.Contains(query, "dryRun") {
		if v, err := url.ParseQuery(query); err == nil && slices.Contains(v["dryRun"], "All") {
			return true
		}
	}
	if verb == "delete" && len(requestObject) > 0 {
		// dryRun is read without being kept: a sender may list
		// millions of values.
		var opts struct {
			Kind   string    `json:"kind"`
			DryRun dryRunAll `json:"dryRun"`
		}
		if json.Unmarshal(requestObject, &opts) == nil && opts.Kind == "DeleteOptions" && bool(opts.DryRun) {
			return true
		}
	}
	return false
}

// errLongTime is a timestamp over its bound, which no RFC 3339 time an
// apiserver writes is.
var errLongTime = errors.New("auditjson: timestamp over its bound")

func parseBoundedTime(t text[timeLimit]) (time.Time, error) {
	if t.cut {
		return time.Time{}, errLongTime
	}
	return parseTime(t.s)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
