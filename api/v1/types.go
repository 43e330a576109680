package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-sunset/sunset/fieldrule"
)

// Group and version of Sunset's API objects.
const (
	Group      = "sunset.dev"
	Version    = "v1"
	APIVersion = Group + "/" + Version
)

// APIRequestCount reports requests to one API. Its status has exactly the
// shape of OpenShift's apiserver.openshift.io/v1 APIRequestCount, so jq and
// jsonpath recipes written for OpenShift work unchanged; fields Sunset adds
// are optional and additive.
type APIRequestCount struct {
	metav1.TypeMeta `json:",inline"`
	// Metadata is named resource.version.group, e.g.
	// "volumeattributesclasses.v1beta1.storage.k8s.io" or "endpoints.v1",
	// and labelled with the removal release and the state (see Labels).
	Metadata metav1.ObjectMeta `json:"metadata"`
	// Spec says how many users each node reports.
	Spec APIRequestCountSpec `json:"spec"`
	// Status holds the requests: the last 24 hours by hour, node, user and
	// verb.
	Status APIRequestCountStatus `json:"status"`
}

// APIRequestCountList is a list of APIRequestCount.
type APIRequestCountList struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ListMeta `json:"metadata"`
	// Items are every API with deprecated requests within the retention
	// period, sorted by name.
	Items []APIRequestCount `json:"items"`
}

// APIRequestCountSpec holds how many users per node the status reports.
type APIRequestCountSpec struct {
	// NumberOfUsersToReport is how many users each node reports per hour,
	// top first: the ?users= of the request, 10 by default.
	NumberOfUsersToReport int64 `json:"numberOfUsersToReport"`
}

// APIRequestCountStatus is OpenShift's status shape.
type APIRequestCountStatus struct {
	// RemovedInRelease is the Kubernetes release that removes the API,
	// "1.37", from the k8s.io/removed-release annotation.
	RemovedInRelease string `json:"removedInRelease,omitempty"`
	// RequestCount is the sum of Last24h.
	RequestCount int64 `json:"requestCount"`
	// CurrentHour is the current UTC hour, the same as its Last24h entry.
	CurrentHour PerResourceAPIRequestLog `json:"currentHour"`
	// Last24h has 24 entries indexed by UTC hour of day: index 0 is
	// 00:00-00:59. It covers the current hour and the 23 before it.
	Last24h []PerResourceAPIRequestLog `json:"last24h"`

	// Fields below are Sunset's additions.

	// DeprecatedInRelease is the release that deprecated the API, from the
	// catalog.
	DeprecatedInRelease string `json:"deprecatedInRelease,omitempty"`
	// Replacement is the API to migrate to, from the catalog.
	Replacement *Replacement `json:"replacement,omitempty"`
	// Warning is the text kube-apiserver sends to clients of the API:
	// "batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in
	// v1.25+; use batch/v1 CronJob".
	Warning string `json:"warning,omitempty"`
	// Removed is true when clients called the API after it was removed
	// (they got a 404 and are broken now) in the last 24 hours.
	Removed bool `json:"removed,omitempty"`
	// RemovedRequestCount is how many of RequestCount were such calls.
	RemovedRequestCount int64 `json:"removedRequestCount,omitempty"`
	// SystemRequestCount is how many of RequestCount came from system
	// identities (see system-users), which an upgrade does not break.
	SystemRequestCount int64 `json:"systemRequestCount,omitempty"`
	// DryRunCount is how many of RequestCount were server-side dry runs
	// (dryRun=All): validation, not use. Every level has one.
	DryRunCount int64 `json:"dryRunCount,omitempty"`
	// Workloads describe, once per client listed in some byUser, what
	// runs behind it and who impersonated it, rather than in every hour
	// and node the client appears in. Clients with nothing known are left
	// out. Sorted by cluster, username and user agent.
	Workloads []ClientWorkload `json:"workloads,omitempty"`
	// Window summarises a longer or shorter period than last24h; present
	// only when ?since= is given.
	Window *Window `json:"window,omitempty"`
}

// Window is the requests of one API from a whole hour up to now.
type Window struct {
	// Since is the requested duration, e.g. "168h0m0s".
	Since string `json:"since"`
	// From is the first hour counted.
	From                time.Time `json:"from"`
	RequestCount        int64     `json:"requestCount"`
	RemovedRequestCount int64     `json:"removedRequestCount,omitempty"`
	SystemRequestCount  int64     `json:"systemRequestCount,omitempty"`
	// ClientCount and SystemClientCount are distinct usernames.
	ClientCount       int `json:"clientCount"`
	SystemClientCount int `json:"systemClientCount,omitempty"`
	// ByUser holds the top users (up to numberOfUsersToReport) over the
	// window, all nodes together.
	ByUser []WindowUser `json:"byUser"`
	// ByHour lists the window's hours that had requests, oldest first;
	// only with ?hourly=true.
	ByHour []HourCount `json:"byHour,omitempty"`
}

// HourCount is one hour of a window.
type HourCount struct {
	// Hour is its start, UTC.
	Hour                time.Time `json:"hour"`
	RequestCount        int64     `json:"requestCount"`
	RemovedRequestCount int64     `json:"removedRequestCount,omitempty"`
	SystemRequestCount  int64     `json:"systemRequestCount,omitempty"`
	DryRunCount         int64     `json:"dryRunCount,omitempty"`
}

// WindowUser is one username's requests over a window.
type WindowUser struct {
	UserName            string `json:"username"`
	RequestCount        int64  `json:"requestCount"`
	RemovedRequestCount int64  `json:"removedRequestCount,omitempty"`
	System              bool   `json:"system,omitempty"`
	// UserAgents are the user agents seen, most requests first, at most 3.
	UserAgents []string `json:"userAgents"`
	// LastSeen is the start of the last hour in the window with requests
	// of this user; zero from a server too old to say.
	LastSeen time.Time `json:"lastSeen,omitzero"`
}

// Replacement names the API that replaces a deprecated one.
type Replacement struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	Resource string `json:"resource,omitempty"`
}

// PerResourceAPIRequestLog is one hour of requests.
type PerResourceAPIRequestLog struct {
	// ByNode lists every apiserver with requests to the API within the
	// retention period, with 0 in the hours it was idle, as OpenShift does:
	// at most MaxNodesPerHour, the busiest kept.
	ByNode []PerNodeAPIRequestLog `json:"byNode"`
	// ByNodeOmitted is Sunset's addition: how many apiservers ByNode
	// leaves out to stay within OpenShift's schema. RequestCount still
	// includes them.
	ByNodeOmitted int `json:"byNodeOmitted,omitempty"`
	// RequestCount is the hour's requests, all apiservers and users.
	RequestCount int64 `json:"requestCount"`
	// SystemRequestCount is Sunset's addition: how many of RequestCount
	// came from system identities.
	SystemRequestCount int64 `json:"systemRequestCount,omitempty"`
	// DryRunCount is Sunset's addition: how many of RequestCount were
	// server-side dry runs.
	DryRunCount int64 `json:"dryRunCount,omitempty"`
}

// PerNodeAPIRequestLog is one hour of requests served by one apiserver.
type PerNodeAPIRequestLog struct {
	// NodeName names the apiserver that served the requests.
	NodeName string `json:"nodeName"`
	// Cluster is Sunset's addition: the cluster of the apiserver.
	Cluster string `json:"cluster,omitempty"`
	// RequestCount is the hour's requests through this apiserver, all
	// users.
	RequestCount int64 `json:"requestCount"`
	// DryRunCount is Sunset's addition: how many of RequestCount were
	// server-side dry runs.
	DryRunCount int64 `json:"dryRunCount,omitempty"`
	// SystemRequestCount is Sunset's addition: how many of RequestCount
	// came from system identities, all users included, so a node's
	// non-system total never depends on which users ByUser lists.
	SystemRequestCount int64 `json:"systemRequestCount,omitempty"`
	// ByUser holds the top users by request count, at most
	// numberOfUsersToReport; RequestCount always includes all of them.
	ByUser []PerUserAPIRequestCount `json:"byUser"`
	// ByUserOmitted is Sunset's addition: how many clients ByUser leaves
	// out.
	ByUserOmitted int `json:"byUserOmitted,omitempty"`
}

// PerUserAPIRequestCount is one client's requests: a username and a user
// agent.
type PerUserAPIRequestCount struct {
	// UserName is the requests' username, cut to 512 bytes.
	UserName string `json:"username"`
	// UserAgent is the client's User-Agent, up to its first space unless
	// Sunset runs with --user-agent=full, and at most 1024 bytes.
	UserAgent string `json:"userAgent"`
	// RequestCount is the client's requests in the hour through the
	// apiserver.
	RequestCount int64 `json:"requestCount"`
	// ByVerb splits RequestCount by verb.
	ByVerb []PerVerbAPIRequestCount `json:"byVerb"`
	// System is Sunset's addition: the username is a system identity.
	System bool `json:"system,omitempty"`
	// RemovedRequestCount is Sunset's addition: requests of this client
	// to the API after its removal.
	RemovedRequestCount int64 `json:"removedRequestCount,omitempty"`
	// DryRunCount is Sunset's addition: how many of RequestCount were
	// server-side dry runs.
	DryRunCount int64 `json:"dryRunCount,omitempty"`
}

// ClientWorkload is what is known about one client of an API: the entry
// of status.workloads that byUser entries with the same cluster, username
// and user agent refer to.
type ClientWorkload struct {
	// Cluster is the cluster of the apiservers that saw the client, as in
	// byNode[].cluster.
	Cluster   string `json:"cluster,omitempty"`
	UserName  string `json:"username"`
	UserAgent string `json:"userAgent"`
	// Workload is what runs behind the client.
	Workload *Workload `json:"workload,omitempty"`
	// ImpersonatedBy are the real callers who made requests as this user
	// through impersonation, most recent first, at most 10. The counts are
	// the impersonated user's, as on OpenShift.
	ImpersonatedBy []Impersonator `json:"impersonatedBy,omitempty"`
}

// Impersonator is a user who impersonated a client, and when last.
type Impersonator struct {
	UserName string    `json:"username"`
	LastSeen time.Time `json:"lastSeen"`
}

// PerVerbAPIRequestCount is one client's requests with one verb: one of
// the Kubernetes request verbs, or "other" for anything else, so that a
// client has at most 10, as OpenShift's schema allows.
type PerVerbAPIRequestCount struct {
	// Verb is get, list, watch, create, update, patch, delete,
	// deletecollection, proxy or other.
	Verb string `json:"verb"`
	// RequestCount is the client's requests with the verb.
	RequestCount int64 `json:"requestCount"`
	// DryRunCount is Sunset's addition: how many of RequestCount were
	// server-side dry runs.
	DryRunCount int64 `json:"dryRunCount,omitempty"`
}

// Workload is what runs behind a client: from a service-account username
// and, for pod-bound tokens, the pods seen recently (at most 10, newest
// first) and the source addresses (at most 10).
type Workload struct {
	Namespace      string `json:"namespace,omitempty"`
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// Owner is guessed from the newest pod's name (web-7d9f8b6c5-x2kqz is
	// Deployment web).
	Owner     *Owner        `json:"owner,omitempty"`
	Pods      []WorkloadPod `json:"pods,omitempty"`
	SourceIPs []SourceIP    `json:"sourceIPs,omitempty"`
}

// Owner is a workload's likely controller.
type Owner struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// WorkloadPod is one pod seen calling, on the node it runs on.
type WorkloadPod struct {
	Name     string    `json:"name"`
	Node     string    `json:"node,omitempty"`
	LastSeen time.Time `json:"lastSeen"`
}

// SourceIP is one client address seen.
type SourceIP struct {
	IP       string    `json:"ip"`
	LastSeen time.Time `json:"lastSeen"`
}

// FieldRequestCount reports requests that set a deprecated field, in the
// same status shape as APIRequestCount.
type FieldRequestCount struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta     `json:"metadata"`
	Spec            FieldRequestCountSpec `json:"spec"`
	Status          APIRequestCountStatus `json:"status"`
}

// FieldRequestCountSpec holds the rule.
type FieldRequestCountSpec struct {
	NumberOfUsersToReport int64          `json:"numberOfUsersToReport"`
	Rule                  fieldrule.Rule `json:"rule"`
}

// FieldRequestCountList is a list of FieldRequestCount.
type FieldRequestCountList struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ListMeta     `json:"metadata"`
	Items           []FieldRequestCount `json:"items"`
}
