package pubsubtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The resource of the entries LogEntry writes: the GKE cluster they come
// from.
const (
	ClusterName = "sunset-test"
	Location    = "us-central1"
)

// LogEntry writes the audit.k8s.io/v1 Event JSON event as the Cloud
// Logging LogEntry JSON that GKE writes for the same request and a Log
// Router sink publishes to Pub/Sub: the reverse of ingest/gke's mapping,
// written apart from it so that each checks the other. Fed the same
// events, a GKE input and any other input count the same requests.
//
//	insertId, operation.id   auditID (both left out without one)
//	operation.first, .last   ResponseComplete and Panic: last (and first, but for a
//	                         watch, whose ResponseStarted entry came first);
//	                         other stages: first only
//	protoPayload.methodName  <group as reversed DNS, io.k8s.core for the core group,
//	                         io.k8s.<group> for one without dots>.<version>.<resource>
//	                         [.<subresource>].<verb>: io.k8s.core.v1.pods.exec.create,
//	                         io.k8s.authorization.rbac.v1.roles.get, com.example.e2e.v1beta1.widgets.list
//	protoPayload.resourceName  <group, or core>/<version>[/namespaces/<ns>]/<resource>[/<name>[/<subresource>]];
//	                         a namespace itself is core/v1/namespaces/<name>; none without objectRef
//	authenticationInfo.principalEmail  the user the request was made as (impersonatedUser,
//	                         else user), whom every input counts it under
//	requestMetadata.callerIp the last of sourceIPs, the address the apiserver saw
//	requestMetadata.callerSuppliedUserAgent  userAgent
//	protoPayload.status      responseStatus.code as a google.rpc.Code ({} for success)
//	protoPayload.request     requestObject
//	timestamp                requestReceivedTimestamp, else stageTimestamp (one is needed)
//	receiveTimestamp         stageTimestamp, else timestamp
//	labels                   annotations
//	resource                 k8s_cluster of Project, Location and ClusterName
//	logName                  cloudaudit.googleapis.com%2Factivity for writes, %2Fdata_access
//	                         for reads (get, list, watch)
//
// What GKE's entry does not carry is lost: requestURI (and with it the
// dry-run flag of all but a DELETE with a body), user groups and extra
// (the pod behind a service account token).
func LogEntry(event []byte) ([]byte, error) {
	var ev auditEvent
	if err := json.Unmarshal(event, &ev); err != nil {
		return nil, fmt.Errorf("pubsubtest: not an audit event: %w", err)
	}
	if ev.Verb == "" {
		return nil, errors.New("pubsubtest: the event has no verb, and a GKE entry always has a method")
	}
	ts := ev.RequestReceivedTimestamp
	if ts == "" {
		ts = ev.StageTimestamp
	}
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		return nil, errors.New("pubsubtest: the event has no requestReceivedTimestamp or stageTimestamp, and a GKE entry always has a timestamp")
	}
	received := ev.StageTimestamp
	if received == "" {
		received = ts
	}
	username := ev.User.Username
	if ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username != "" {
		username = ev.ImpersonatedUser.Username
	}
	resource, method := names(ev.ObjectRef, ev.Verb)
	e := logEntry{
		InsertID:         ev.AuditID,
		LogName:          "projects/" + Project + "/logs/cloudaudit.googleapis.com%2F" + logKind(ev.Verb),
		Timestamp:        ts,
		ReceiveTimestamp: received,
		Severity:         "INFO",
		Labels:           ev.Annotations,
		Resource: monitoredResource{Type: "k8s_cluster", Labels: map[string]string{
			"project_id": Project, "location": Location, "cluster_name": ClusterName}},
		Operation: operation{ID: ev.AuditID, Producer: "k8s.io"},
		ProtoPayload: auditLog{
			Type:               "type.googleapis.com/google.cloud.audit.AuditLog",
			ServiceName:        "k8s.io",
			MethodName:         method,
			ResourceName:       resource,
			AuthenticationInfo: authenticationInfo{PrincipalEmail: username},
			AuthorizationInfo:  []authorizationInfo{{Granted: true, Permission: method, Resource: resource}},
			RequestMetadata:    requestMetadata{CallerSuppliedUserAgent: ev.UserAgent},
			Status:             rpcStatus{},
			Request:            ev.RequestObject,
		},
	}
	if len(ev.SourceIPs) > 0 {
		e.ProtoPayload.RequestMetadata.CallerIP = ev.SourceIPs[len(ev.SourceIPs)-1]
	}
	switch ev.Stage {
	case "ResponseComplete", "Panic":
		e.Operation.Last = true
		e.Operation.First = ev.Verb != "watch"
	default:
		e.Operation.First = true
	}
	if ev.ResponseStatus != nil {
		if code := rpcCode(ev.ResponseStatus.Code); code != 0 {
			e.ProtoPayload.Status = rpcStatus{Code: code, Message: rpcNames[code]}
			e.Severity = "ERROR"
		}
	}
	if len(ev.RequestObject) == 0 || ev.RequestObject[0] != '{' {
		e.ProtoPayload.Request = nil
	}
	return json.Marshal(e)
}

// auditEvent is what LogEntry reads of an event.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	SourceIPs []string   `json:"sourceIPs"`
	UserAgent string     `json:"userAgent"`
	ObjectRef *objectRef `json:"objectRef"`
	// ResponseStatus.Code is a float, as an EventList item may write it
	// (any JSON number).
	ResponseStatus *struct {
		Code float64 `json:"code"`
	} `json:"responseStatus"`
	RequestObject            json.RawMessage   `json:"requestObject"`
	RequestReceivedTimestamp string            `json:"requestReceivedTimestamp"`
	StageTimestamp           string            `json:"stageTimestamp"`
	Annotations              map[string]string `json:"annotations"`
}

type objectRef struct {
	Resource    string `json:"resource"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	APIGroup    string `json:"apiGroup"`
	APIVersion  string `json:"apiVersion"`
	Subresource string `json:"subresource"`
}

// The LogEntry, in the JSON form the sink publishes (proto3 JSON names).
type logEntry struct {
	InsertID         string            `json:"insertId,omitempty"`
	LogName          string            `json:"logName"`
	ProtoPayload     auditLog          `json:"protoPayload"`
	Resource         monitoredResource `json:"resource"`
	Timestamp        string            `json:"timestamp"`
	ReceiveTimestamp string            `json:"receiveTimestamp"`
	Severity         string            `json:"severity"`
	Labels           map[string]string `json:"labels,omitempty"`
	Operation        operation         `json:"operation"`
}

type monitoredResource struct {
	Type   string            `json:"type"`
	Labels map[string]string `json:"labels"`
}

type operation struct {
	ID       string `json:"id,omitempty"`
	Producer string `json:"producer"`
	First    bool   `json:"first,omitempty"`
	Last     bool   `json:"last,omitempty"`
}

type auditLog struct {
	Type               string              `json:"@type"`
	AuthenticationInfo authenticationInfo  `json:"authenticationInfo"`
	AuthorizationInfo  []authorizationInfo `json:"authorizationInfo"`
	MethodName         string              `json:"methodName"`
	RequestMetadata    requestMetadata     `json:"requestMetadata"`
	ResourceName       string              `json:"resourceName,omitempty"`
	ServiceName        string              `json:"serviceName"`
	Status             rpcStatus           `json:"status"`
	Request            json.RawMessage     `json:"request,omitempty"`
}

type authenticationInfo struct {
	PrincipalEmail string `json:"principalEmail,omitempty"`
}

type authorizationInfo struct {
	Granted    bool   `json:"granted"`
	Permission string `json:"permission"`
	Resource   string `json:"resource,omitempty"`
}

type requestMetadata struct {
	CallerIP                string `json:"callerIp,omitempty"`
	CallerSuppliedUserAgent string `json:"callerSuppliedUserAgent,omitempty"`
}

type rpcStatus struct {
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// names returns the resourceName and methodName of a request.
func names(ref *objectRef, verb string) (resource, method string) {
	if ref == nil {
		return "", "io.k8s." + verb
	}
	group := ref.APIGroup
	if group == "" {
		group = "core"
	}
	parts := []string{group, ref.APIVersion}
	switch {
	case ref.Resource == "namespaces" && ref.Name != "":
		parts = append(parts, "namespaces", ref.Name)
	case ref.Namespace != "":
		parts = append(parts, "namespaces", ref.Namespace, ref.Resource)
		if ref.Name != "" {
			parts = append(parts, ref.Name)
		}
	default:
		parts = append(parts, ref.Resource)
		if ref.Name != "" {
			parts = append(parts, ref.Name)
		}
	}
	if ref.Subresource != "" {
		parts = append(parts, ref.Subresource)
	}
	m := []string{methodGroup(ref.APIGroup), ref.APIVersion, ref.Resource}
	if ref.Subresource != "" {
		m = append(m, ref.Subresource)
	}
	return strings.Join(parts, "/"), strings.Join(append(m, verb), ".")
}

// methodGroup is an API group as GKE's method names write it: reversed DNS
// (rbac.authorization.k8s.io is io.k8s.authorization.rbac), under io.k8s
// for the core group and groups without a dot.
func methodGroup(group string) string {
	switch {
	case group == "":
		return "io.k8s.core"
	case !strings.Contains(group, "."):
		return "io.k8s." + group
	}
	labels := strings.Split(group, ".")
	slices.Reverse(labels)
	return strings.Join(labels, ".")
}

func logKind(verb string) string {
	switch verb {
	case "get", "list", "watch":
		return "data_access"
	}
	return "activity"
}

// rpcCode is the google.rpc.Code of an HTTP status, as
// google/rpc/code.proto pairs them: success is OK, and statuses it does
// not name go by class.
func rpcCode(status float64) int {
	switch s := int(status); {
	case s < 400:
		return 0 // OK
	case s == 400:
		return 3 // INVALID_ARGUMENT
	case s == 401:
		return 16 // UNAUTHENTICATED
	case s == 403:
		return 7 // PERMISSION_DENIED
	case s == 404:
		return 5 // NOT_FOUND
	case s == 409:
		return 10 // ABORTED
	case s == 429:
		return 8 // RESOURCE_EXHAUSTED
	case s == 499:
		return 1 // CANCELLED
	case s < 500:
		return 9 // FAILED_PRECONDITION
	case s == 501:
		return 12 // UNIMPLEMENTED
	case s == 503:
		return 14 // UNAVAILABLE
	case s == 504:
		return 4 // DEADLINE_EXCEEDED
	default:
		return 13 // INTERNAL
	}
}

var rpcNames = map[int]string{1: "CANCELLED", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND", 7: "PERMISSION_DENIED",
	8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 10: "ABORTED", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE", 16: "UNAUTHENTICATED"}
