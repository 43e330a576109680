package gke

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// The mapping from a GKE audit LogEntry, as a Log Router sink publishes it
// (the entry's JSON), to the audit.k8s.io/v1 Event it stands for. The
// event is then decoded by auditjson like any other source's, so that
// every counting rule (deprecation and admission annotations, dedupe,
// hours) is applied the same way.
//
//	auditID                   operation.id, else insertId (else a digest of the event)
//	stage                     ResponseStarted when operation.first and not operation.last
//	                          (the first entry of a watch), else ResponseComplete
//	verb                      the last dot-separated part of protoPayload.methodName:
//	                          io.k8s.core.v1.pods.list → list, io.k8s.core.v1.pods.exec.create → create
//	objectRef                 protoPayload.resourceName, read as kube-apiserver reads a path:
//	                          <group>/<version>[/namespaces/<ns>]/<resource>[/<name>[/<subresource>]],
//	                          core meaning the empty group; namespaces/<ns>/status and /finalize
//	                          are the namespace's subresources; fewer than three parts, none
//	user.username             protoPayload.authenticationInfo.principalEmail
//	sourceIPs                 [protoPayload.requestMetadata.callerIp]
//	userAgent                 protoPayload.requestMetadata.callerSuppliedUserAgent
//	requestReceivedTimestamp  timestamp (the request's time; receiveTimestamp is Logging's)
//	stageTimestamp            timestamp
//	annotations               labels (k8s.io/deprecated, k8s.io/removed-release,
//	                          authorization.k8s.io/*, admission webhook annotations)
//	responseStatus.code       protoPayload.status.code, a google.rpc.Code, as HTTP (httpStatus)
//	requestObject             protoPayload.request, when it is an object (field rules, a DELETE's dryRun)
//
// The apiserver node is not in the entry: resource.labels.location (the
// cluster's zone or region) stands for it, else "gke" (DefaultNode).

// Reason is why a message was not made into an event. Values are metric
// label values, of sunset_gke_messages_total and
// sunset_ingest_decode_errors_total.
type Reason string

// Reasons a message is acknowledged without an event.
const (
	// ReasonTooLarge is a message over MaxMessageBytes.
	ReasonTooLarge Reason = "too_large"
	// ReasonMalformedJSON is a message that is not JSON.
	ReasonMalformedJSON Reason = "malformed_json"
	// ReasonMalformedEntry is JSON that is not a LogEntry: a field of the
	// wrong type, no methodName.
	ReasonMalformedEntry Reason = "malformed_entry"
	// ReasonBadTimestamp is an entry without a timestamp or with one that
	// is not RFC 3339.
	ReasonBadTimestamp Reason = "bad_timestamp"
	// ReasonWrongPayloadType is an entry without a protoPayload of type
	// AuditLog (a textPayload or jsonPayload entry).
	ReasonWrongPayloadType Reason = "wrong_payload_type"
	// ReasonNotAudit is an audit entry of another service than k8s.io
	// (the GKE API's own, container.googleapis.com), which a broad sink
	// filter lets through.
	ReasonNotAudit Reason = "not_audit"
)

// unreadable reports whether r is a message that could not be read, as
// opposed to a readable entry of another kind: only those are invalid
// events.
func (r Reason) unreadable() bool { return r != ReasonWrongPayloadType && r != ReasonNotAudit }

// MaxMessageBytes bounds a message. Cloud Logging caps an entry at 256 KB
// and its JSON is at most a few times that; a larger message is not one
// of its entries and is acknowledged unread (too_large).
const MaxMessageBytes = 1 << 20

// DefaultNode is the node of entries whose resource has no location.
const DefaultNode = "gke"

const (
	auditLogType = "type.googleapis.com/google.cloud.audit.AuditLog"
	k8sService   = "k8s.io"
)

// logEntry is the part of a LogEntry the mapping reads.
type logEntry struct {
	InsertID  string `json:"insertId"`
	Timestamp string `json:"timestamp"`
	// Labels are the event's annotations, passed on as they lie: the
	// event's decoder bounds how many it reads and how long each is,
	// where a map would hold every one, and sort them to write them.
	Labels   json.RawMessage `json:"labels"`
	Resource struct {
		Labels struct {
			Location string `json:"location"`
		} `json:"labels"`
	} `json:"resource"`
	Operation *struct {
		ID    string `json:"id"`
		First bool   `json:"first"`
		Last  bool   `json:"last"`
	} `json:"operation"`
	ProtoPayload *auditLog `json:"protoPayload"`
}

// auditLog is the part of a google.cloud.audit.AuditLog the mapping reads.
type auditLog struct {
	Type               string `json:"@type"`
	ServiceName        string `json:"serviceName"`
	MethodName         string `json:"methodName"`
	ResourceName       string `json:"resourceName"`
	AuthenticationInfo struct {
		PrincipalEmail string `json:"principalEmail"`
	} `json:"authenticationInfo"`
	RequestMetadata struct {
		CallerIP                string `json:"callerIp"`
		CallerSuppliedUserAgent string `json:"callerSuppliedUserAgent"`
	} `json:"requestMetadata"`
	Status *struct {
		Code int64 `json:"code"`
	} `json:"status"`
	Request json.RawMessage `json:"request"`
}

// auditEvent is the audit.k8s.io/v1 Event an entry stands for, as much of
// it as the entry tells.
type auditEvent struct {
	Kind           string          `json:"kind"`
	APIVersion     string          `json:"apiVersion"`
	AuditID        string          `json:"auditID,omitempty"`
	Stage          string          `json:"stage"`
	Verb           string          `json:"verb"`
	User           user            `json:"user"`
	SourceIPs      []string        `json:"sourceIPs,omitempty"`
	UserAgent      string          `json:"userAgent,omitempty"`
	ObjectRef      *objectRef      `json:"objectRef,omitempty"`
	ResponseStatus responseStatus  `json:"responseStatus"`
	RequestObject  json.RawMessage `json:"requestObject,omitempty"`
	Received       string          `json:"requestReceivedTimestamp"`
	StageTime      string          `json:"stageTimestamp"`
	Annotations    json.RawMessage `json:"annotations,omitempty"`
}

type user struct {
	Username string `json:"username"`
}

type responseStatus struct {
	Code int `json:"code"`
}

type objectRef struct {
	Resource    string `json:"resource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	APIGroup    string `json:"apiGroup,omitempty"`
	APIVersion  string `json:"apiVersion,omitempty"`
	Subresource string `json:"subresource,omitempty"`
}

// entryError is a message that did not become an event: a bounded reason
// and a message that never quotes the entry.
type entryError struct {
	Reason  Reason
	Message string
}

func (e *entryError) Error() string { return e.Message }

// toEvent maps the message data of one entry to the audit event JSON it
// stands for, and names its node. The error is an *entryError.
func toEvent(data []byte) (event []byte, node string, err error) {
	if len(data) > MaxMessageBytes {
		return nil, "", &entryError{ReasonTooLarge, fmt.Sprintf("message is %d bytes, over %d", len(data), MaxMessageBytes)}
	}
	var e logEntry
	if err := json.Unmarshal(data, &e); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, "", &entryError{ReasonMalformedJSON, fmt.Sprintf("message is not JSON (at byte %d)", syn.Offset)}
		case errors.As(err, &typ) && typ.Field != "":
			return nil, "", &entryError{ReasonMalformedEntry, fmt.Sprintf("entry field %s is a JSON %s", typ.Field, typ.Value)}
		case errors.As(err, &typ):
			return nil, "", &entryError{ReasonMalformedEntry, fmt.Sprintf("message is a JSON %s, not a LogEntry object", typ.Value)}
		default:
			return nil, "", &entryError{ReasonMalformedJSON, "message is not JSON"}
		}
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); trimmed[0] != '{' {
		// null, the one JSON value besides an object that decodes into a
		// struct.
		return nil, "", &entryError{ReasonMalformedEntry, "message is JSON null, not a LogEntry object"}
	}
	p := e.ProtoPayload
	switch {
	case p == nil:
		return nil, "", &entryError{ReasonWrongPayloadType, "entry has no protoPayload"}
	case p.Type != auditLogType:
		return nil, "", &entryError{ReasonWrongPayloadType, "protoPayload is not a google.cloud.audit.AuditLog"}
	case p.ServiceName != k8sService:
		return nil, "", &entryError{ReasonNotAudit, "protoPayload.serviceName is not k8s.io"}
	}
	verb := p.MethodName[strings.LastIndexByte(p.MethodName, '.')+1:]
	if verb == "" {
		return nil, "", &entryError{ReasonMalformedEntry, "protoPayload.methodName has no verb"}
	}
	if e.Timestamp == "" {
		return nil, "", &entryError{ReasonBadTimestamp, "entry has no timestamp"}
	}
	if _, err := time.Parse(time.RFC3339Nano, e.Timestamp); err != nil {
		return nil, "", &entryError{ReasonBadTimestamp, "timestamp is not an RFC 3339 time"}
	}
	ev := auditEvent{
		Kind:           auditjson.KindEvent,
		APIVersion:     auditjson.APIVersion,
		AuditID:        e.InsertID,
		Stage:          classify.StageResponseComplete,
		Verb:           verb,
		User:           user{Username: p.AuthenticationInfo.PrincipalEmail},
		UserAgent:      p.RequestMetadata.CallerSuppliedUserAgent,
		ObjectRef:      parseResourceName(p.ResourceName),
		ResponseStatus: responseStatus{Code: http200},
		Received:       e.Timestamp,
		StageTime:      e.Timestamp,
	}
	switch l := bytes.TrimLeft(e.Labels, " \t\r\n"); {
	case len(l) == 0 || bytes.Equal(l, []byte("null")):
	case l[0] == '{':
		ev.Annotations = e.Labels
	default:
		return nil, "", &entryError{ReasonMalformedEntry, "entry field labels is not an object"}
	}
	if op := e.Operation; op != nil {
		if op.ID != "" {
			ev.AuditID = op.ID
		}
		// A long-running request (a watch, an exec) has two entries:
		// the first when the response starts, the last when it ends.
		if op.First && !op.Last {
			ev.Stage = "ResponseStarted"
		}
	}
	if ip := p.RequestMetadata.CallerIP; ip != "" {
		ev.SourceIPs = []string{ip}
	}
	if p.Status != nil {
		ev.ResponseStatus.Code = httpStatus(p.Status.Code)
	}
	if len(p.Request) > 0 && p.Request[0] == '{' {
		ev.RequestObject = p.Request
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		// Every field is a string or valid JSON already.
		return nil, "", &entryError{ReasonMalformedEntry, "entry cannot be re-encoded"}
	}
	return raw, nodeOf(e.Resource.Labels.Location), nil
}

// decode makes the message data of one entry into an event, with its node.
// The error is an *entryError.
func decode(data []byte) (classify.Event, string, error) {
	ev, node, _, err := decodeFiltered(data, nil)
	return ev, node, err
}

// decodeFiltered is decode behind the pre-filter: an entry it sets aside
// comes back as aside, set, and no event.
//
// The pre-filter reads an audit event's own fields (stage, annotations,
// objectRef, responseStatus) at its top level; a LogEntry holds them
// elsewhere and under other names (operation, labels, protoPayload's
// resourceName and status), so its bytes cannot be judged. It judges the
// event toEvent writes instead: the same bytes auditjson would decode,
// so the same verdict, and what it saves is that second decode.
func decodeFiltered(data []byte, p *auditjson.Prefilter) (ev classify.Event, node string, aside classify.SetAside, err error) {
	raw, node, err := toEvent(data)
	if err != nil {
		return classify.Event{}, "", aside, err
	}
	if r, skip := p.Skip(raw); skip {
		return classify.Event{}, node, r, nil
	}
	ev, err = auditjson.DecodeEvent(raw)
	if err != nil {
		// toEvent checked what auditjson checks, but for the labels,
		// which it passes on unread: a label that is not a string makes
		// the entry malformed, as any other field of the wrong type.
		var ae *auditjson.Error
		if errors.As(err, &ae) {
			if ae.Reason == auditjson.ReasonMalformedEvent {
				return classify.Event{}, "", aside, &entryError{ReasonMalformedEntry, "entry field labels: " + ae.Message}
			}
			return classify.Event{}, "", aside, &entryError{Reason(ae.Reason), ae.Message}
		}
		return classify.Event{}, "", aside, &entryError{ReasonMalformedEntry, "entry is not an audit event"}
	}
	return ev, node, aside, nil
}

// namespaceSubresources are the subresources of a namespace, which
// kube-apiserver tells from a namespaced resource in the same place of
// the path (namespaces/<ns>/status).
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// parseResourceName reads a resourceName as kube-apiserver's RequestInfo
// reads the path after /apis: group/version, then namespaces/<ns> for a
// namespaced request, then resource, name and subresource. A name of
// fewer than three parts names no resource (nil).
func parseResourceName(s string) *objectRef {
	parts := strings.Split(s, "/")
	if len(parts) < 3 {
		return nil
	}
	ref := &objectRef{APIGroup: parts[0], APIVersion: parts[1]}
	if ref.APIGroup == "core" {
		ref.APIGroup = ""
	}
	rest := parts[2:]
	if rest[0] == "namespaces" && len(rest) > 1 {
		ref.Namespace = rest[1]
		if len(rest) > 2 && !namespaceSubresources[rest[2]] {
			rest = rest[2:]
		}
	}
	ref.Resource = rest[0]
	if len(rest) > 1 {
		ref.Name = rest[1]
	}
	if len(rest) > 2 {
		// A proxy's path after the subresource is not part of it.
		ref.Subresource = rest[2]
	}
	return ref
}

const http200 = 200

// httpStatus is the HTTP status of a google.rpc.Code, as google/rpc/code.proto
// pairs them; GKE writes the apiserver's HTTP status as its code, so only
// the class survives the round trip (200 and 201 are both OK; 409 is
// ALREADY_EXISTS or ABORTED). What counting reads, a 404, does survive:
//
//	0 OK → 200                  9 FAILED_PRECONDITION → 400
//	1 CANCELLED → 499          10 ABORTED → 409
//	2 UNKNOWN → 500            11 OUT_OF_RANGE → 400
//	3 INVALID_ARGUMENT → 400   12 UNIMPLEMENTED → 501
//	4 DEADLINE_EXCEEDED → 504  13 INTERNAL → 500
//	5 NOT_FOUND → 404          14 UNAVAILABLE → 503
//	6 ALREADY_EXISTS → 409     15 DATA_LOSS → 500
//	7 PERMISSION_DENIED → 403  16 UNAUTHENTICATED → 401
//	8 RESOURCE_EXHAUSTED → 429  any other → 500
func httpStatus(code int64) int {
	if code >= 0 && code < int64(len(rpcToHTTP)) {
		return rpcToHTTP[code]
	}
	return 500
}

var rpcToHTTP = [...]int{200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401}

// locationRe is a Google Cloud zone or region (us-central1,
// europe-west4-a).
var locationRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// nodeOf is the node an entry is counted under: its cluster's location,
// else DefaultNode. A value that is not a location (a sender's invention)
// is DefaultNode too, so that it cannot add nodes at will.
func nodeOf(location string) string {
	if locationRe.MatchString(location) {
		return location
	}
	return DefaultNode
}
