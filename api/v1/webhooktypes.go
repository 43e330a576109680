package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WebhookCount reports one admission webhook, named
// configuration.webhook: on which resources it was called, how often it
// mutated or failed open, and how long it kept requests waiting. Its status
// has the layout of APIRequestCount's: totals over the last 24 hours, the
// current hour, last24h indexed by UTC hour of day, and an optional window.
type WebhookCount struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta  `json:"metadata"`
	Spec            WebhookCountSpec   `json:"spec"`
	Status          WebhookCountStatus `json:"status"`
}

// WebhookCountList is a list of WebhookCount, with every resource's totals
// over all webhooks beside it.
type WebhookCountList struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ListMeta `json:"metadata"`
	Items           []WebhookCount  `json:"items"`
	// Resources are the resources with webhook annotations over the window
	// (?since=, else the last 24 hours), all webhooks together, slowest
	// first: the total webhook latency per resource.
	Resources []WebhookResourceCount `json:"resources"`
	// Certificates are the webhook servers whose serving certificate
	// kube-apiserver flagged over the same hours, soonest refused first;
	// left out when it flagged none.
	Certificates []WebhookCertificate `json:"certificates,omitempty"`
}

// WebhookCertificate is a webhook server whose serving certificate
// kube-apiserver flagged on the calls of some requests: signed with SHA-1,
// or without subjectAltName. kube-apiserver names the server's host, not a
// webhook: the webhooks whose clientConfig points at it (a Service as
// name.namespace.svc, or a URL's host) share it.
type WebhookCertificate struct {
	Cluster string `json:"cluster"`
	Host    string `json:"host"`
	// Problem is insecure-sha1 or missing-san, as kube-apiserver's
	// annotation key names it.
	Problem string `json:"problem"`
	// Reason is kube-apiserver's annotation value for the problem.
	Reason string `json:"reason"`
	// RefusedByDefaultInRelease is the first Kubernetes release whose
	// kube-apiserver refuses such a certificate unless GODEBUG lets it
	// through, and RefusedInRelease the first that refuses it whatever
	// its settings.
	RefusedByDefaultInRelease string `json:"refusedByDefaultInRelease"`
	GODEBUG                   string `json:"godebug"`
	RefusedInRelease          string `json:"refusedInRelease"`
	// RequestCount is the requests whose calls flagged it.
	RequestCount int64 `json:"requestCount"`
	// LastSeen is the start of the last UTC hour that flagged it.
	LastSeen time.Time `json:"lastSeen"`
	// ByResource splits RequestCount by the resource requested, most
	// requests first.
	ByResource []WebhookCertificateResource `json:"byResource"`
}

// WebhookCertificateResource is one resource whose requests flagged a
// server's certificate.
type WebhookCertificateResource struct {
	// Name is the resource as APIRequestCount names it.
	Name         string `json:"name"`
	Subresource  string `json:"subresource,omitempty"`
	RequestCount int64  `json:"requestCount"`
}

// WebhookCountSpec names the webhook.
type WebhookCountSpec struct {
	// Configuration is the Mutating- or ValidatingWebhookConfiguration;
	// empty when the audit annotations do not say and admission.webhooks
	// does not either (validating webhooks).
	Configuration string `json:"configuration,omitempty"`
	Webhook       string `json:"webhook"`
	// Types are mutating, validating or both.
	Types []string `json:"types"`
}

// WebhookCountStatus holds a webhook's counts.
type WebhookCountStatus struct {
	// WebhookCounts are the totals of Last24h.
	WebhookCounts
	// ByResource splits the totals by resource, slowest first.
	ByResource []WebhookResourceCount `json:"byResource"`
	// CurrentHour is the current UTC hour, the same as its Last24h entry.
	CurrentHour WebhookHour `json:"currentHour"`
	// Last24h has 24 entries indexed by UTC hour of day: index 0 is
	// 00:00-00:59, covering the current hour and the 23 before it.
	Last24h []WebhookHour `json:"last24h"`
	// Window covers ?since=.
	Window *WebhookWindow `json:"window,omitempty"`
}

// WebhookCounts are the counts of one webhook (or of all, for a
// resource's totals) over some hours.
type WebhookCounts struct {
	// RequestCount is the requests the webhook was called on (for a
	// resource's totals: the requests with any webhook annotation).
	RequestCount int64 `json:"requestCount"`
	// CallCount is the calls: a reinvoked mutating webhook is called twice
	// on one request. Validating calls leave an annotation only when they
	// fail open, so for validating webhooks this counts only those.
	CallCount int64 `json:"callCount"`
	// MutationCount is the calls that changed the object.
	MutationCount int64 `json:"mutationCount"`
	// FailedOpenCount is the calls that failed and were ignored
	// (failurePolicy: Ignore): the request went on without the webhook.
	FailedOpenCount int64 `json:"failedOpenCount"`
	// SlowRequestCount is the requests that carried webhook latency:
	// kube-apiserver annotates it only on requests slower than 500 ms.
	SlowRequestCount int64 `json:"slowRequestCount"`
	// WebhookLatencySeconds sums the webhook latency of those requests.
	// For one webhook it is the latency of every webhook of its type on
	// each request: kube-apiserver does not split it further.
	WebhookLatencySeconds float64 `json:"webhookLatencySeconds"`
	// MeanWebhookLatencySeconds is WebhookLatencySeconds per slow request.
	MeanWebhookLatencySeconds float64 `json:"meanWebhookLatencySeconds,omitempty"`
	// LatencyBuckets spreads the slow requests by their webhook latency;
	// left out when there are none.
	LatencyBuckets LatencyBuckets `json:"latencyBuckets,omitzero"`
}

// LatencyBuckets counts slow requests by webhook latency; each bucket
// holds the requests above the previous bound up to its own.
type LatencyBuckets struct {
	UpTo500ms int64 `json:"upTo0.5s"`
	UpTo1s    int64 `json:"upTo1s"`
	UpTo2s    int64 `json:"upTo2s"`
	UpTo5s    int64 `json:"upTo5s"`
	UpTo10s   int64 `json:"upTo10s"`
	Over10s   int64 `json:"over10s"`
}

// WebhookResourceCount is the counts of one resource.
type WebhookResourceCount struct {
	// Name is the resource as APIRequestCount names it:
	// resource.version.group.
	Name        string `json:"name"`
	Cluster     string `json:"cluster"`
	Group       string `json:"group"`
	Version     string `json:"version"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
	// Classes are the resource's classes: critical, security, virtual.
	Classes []string `json:"classes,omitempty"`
	WebhookCounts
}

// WebhookHour is one hour of a webhook's counts.
type WebhookHour struct {
	WebhookCounts
	ByResource []WebhookResourceCount `json:"byResource"`
}

// WebhookWindow is a webhook's counts from the hour Since ago until now.
type WebhookWindow struct {
	Since string    `json:"since"`
	From  time.Time `json:"from"`
	WebhookCounts
	ByResource []WebhookResourceCount `json:"byResource"`
}
