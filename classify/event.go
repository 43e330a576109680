package classify

import (
	"cmp"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/cardinality"
	"github.com/kube-sunset/sunset/countkey"
)

// Audit stages that end a request. Only these carry the deprecation
// annotations.
const (
	StageResponseComplete = "ResponseComplete"
	StagePanic            = "Panic"
)

// Event is the part of one audit event that Sunset uses. Ingest fills it;
// request and response bodies never reach it.
type Event struct {
	// ID is the auditID, or a digest of the raw event when it has none, so
	// that re-sent events still deduplicate. With the request's received
	// time it makes the request's identity (RequestID). Its length is
	// the sender's: kube-apiserver copies the Audit-ID header as is.
	ID    string
	Stage string
	Verb  string
	// Username is the user the request was made as: the impersonated user
	// when there is one, as OpenShift counts it.
	Username string
	// ImpersonatedBy is the real caller of an impersonated request.
	ImpersonatedBy string
	UserAgent      string
	// ObjectRef is nil for non-resource requests such as /healthz.
	ObjectRef    *ObjectRef
	ResponseCode int32
	// Deprecated is the k8s.io/deprecated annotation.
	Deprecated bool
	// RemovedRelease is the k8s.io/removed-release annotation, e.g. "1.37".
	RemovedRelease  string
	RequestReceived time.Time
	// IdentityTime is the received time the request is identified by,
	// when it is not RequestReceived: a replay moved in time keeps the
	// original here, so that it is still the same request. Zero means
	// RequestReceived.
	IdentityTime time.Time
	StageTime    time.Time
	// DryRun marks a server-side dry run (dryRun=All).
	DryRun bool
	// PodName and PodNode come from a pod-bound service account token
	// (user.extra): the workload behind the request.
	PodName, PodNode string
	// SourceIPs are the client addresses as the apiserver lists them: the
	// X-Forwarded-For addresses the caller sent, then, always last, the
	// address the apiserver saw itself. The decoder keeps at most
	// MaxSourceIPs of them, the first forwarded ones and the last, and
	// only IP addresses.
	SourceIPs []string
	// RequestObject is the raw request body at Request level or above, for
	// field rules. It is never stored or logged.
	RequestObject []byte
	// Admission holds what the annotations say about admission webhooks;
	// nil when they say nothing.
	Admission *admission.Facts
	// Dropped says what the decoder left out of the event; the event
	// counts with what it kept.
	Dropped Dropped
}

// Dropped says what a decoder left out of an event: values over their
// bound, or not what their field means. Every field of an event is the
// sender's, so each is bounded as it is read, and an event is kept with
// what fits. Ingest counts each reason once per event in
// sunset_ingest_decode_errors_total.
type Dropped uint8

// What a decoder may leave out of an event.
const (
	// DroppedRemovedRelease is a k8s.io/removed-release annotation that
	// is not a release such as "1.37", or is longer than
	// MaxReleaseBytes. The event counts as if it had none.
	DroppedRemovedRelease Dropped = 1 << iota
	// DroppedSourceIP is a sourceIPs entry that is not an IP address.
	DroppedSourceIP
	// DroppedOverBound is a list or a string cut at its bound: more
	// sourceIPs than MaxSourceIPs, a username or user agent longer than
	// the store keeps, too many or too long admission webhook
	// annotations.
	DroppedOverBound
)

// droppedReasons are the label values of each Dropped bit, in
// sunset_ingest_decode_errors_total.
var droppedReasons = [...]struct {
	bit    Dropped
	reason string
}{
	{DroppedRemovedRelease, "bad_removed_release"},
	{DroppedSourceIP, "bad_source_ip"},
	{DroppedOverBound, "over_bound"},
}

// Reasons are the label values of what d holds.
func (d Dropped) Reasons() []string {
	var out []string
	for _, r := range droppedReasons {
		if d&r.bit != 0 {
			out = append(out, r.reason)
		}
	}
	return out
}

// ObjectRef names the API resource a request was about.
type ObjectRef struct {
	Group       string // empty for the core group
	Version     string
	Resource    string
	Subresource string
}

// Result is what became of one event. Values are metric label values.
type Result string

// Results of classification and commit.
const (
	ResultCounted       Result = "counted"
	ResultDuplicate     Result = "duplicate"
	ResultOtherStage    Result = "skipped_stage"
	ResultNotDeprecated Result = "not_deprecated"
	ResultNoObjectRef   Result = "no_object_ref"
	ResultExpired       Result = "expired"
	ResultFuture        Result = "future"
	ResultInvalid       Result = "invalid"
	// ResultTooLong is a request with a name longer than Kubernetes
	// allows (an API group, version, resource or subresource, or a part
	// of a key the store bounds): no apiserver sends one, and shortening
	// it could merge it with another API's counts.
	ResultTooLong Result = Result(countkey.SkipTooLong)
)

// futureSlack is how far ahead of Sunset's clock an event may claim to be.
// Apiserver clocks drift a little; an event a day ahead is bogus.
const futureSlack = 24 * time.Hour

// Hour is the UTC hour an event is counted in: that of
// requestReceivedTimestamp, so replays and late deliveries land where the
// request happened, else that of stageTimestamp, else ok is false.
func (e *Event) Hour() (hour time.Time, ok bool) {
	switch {
	case !e.RequestReceived.IsZero():
		return e.RequestReceived.UTC().Truncate(time.Hour), true
	case !e.StageTime.IsZero():
		return e.StageTime.UTC().Truncate(time.Hour), true
	}
	return time.Time{}, false
}

// Request classifies e, from o, as a request to a deprecated or removed
// API: the request when the Result is ResultCounted, else why it does not
// count. It is the decision Ingest counts in sunset_ingest_events_total.
func (c *Classifier) Request(o Origin, e *Event, now time.Time) (countkey.Request, Result) {
	if e.Stage != StageResponseComplete && e.Stage != StagePanic {
		return countkey.Request{}, ResultOtherStage
	}
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" || e.ObjectRef.Version == "" {
		if e.Deprecated {
			return countkey.Request{}, ResultNoObjectRef
		}
		return countkey.Request{}, ResultNotDeprecated
	}
	ref := e.ObjectRef
	removedRelease, removed, counts := c.lifecycle(o.Cluster, e)
	if !counts {
		return countkey.Request{}, ResultNotDeprecated
	}
	if refTooLong(ref) {
		return countkey.Request{}, ResultTooLong
	}
	hour, res := c.countedHour(e, now)
	if res != ResultCounted {
		return countkey.Request{}, res
	}
	return countkey.Request{
		ID:       e.identity(),
		LegacyID: e.ID,
		Key: countkey.CountKey{
			Cluster: originCluster(o),
			API:     countkey.APIName(ref.Group, ref.Version, ref.Resource),
			Cell:    c.cell(o, e, hour),
			Removed: removed,
		},
		RemovedRelease: removedRelease,
		Seen:           sighting(e, now),
	}, ResultCounted
}

// countedHour is the hour a request is counted in, or why it cannot be.
func (c *Classifier) countedHour(e *Event, now time.Time) (time.Time, Result) {
	hour, ok := e.Hour()
	if !ok {
		// Without any timestamp the arrival hour is the best guess.
		hour = now.UTC().Truncate(time.Hour)
	}
	if c.Expired(hour, now) {
		return hour, ResultExpired
	}
	if hour.After(now.Add(futureSlack)) {
		return hour, ResultFuture
	}
	return hour, ResultCounted
}

// NeedsRequestObject reports whether the classifier reads e's request object: only
// for a completed request that a field rule selects. Decoders keep the
// object only then, so that a batch of large objects is not held whole.
func (c *Classifier) NeedsRequestObject(e *Event) bool {
	if c.fieldRules == nil || e.ObjectRef == nil || (e.Stage != StageResponseComplete && e.Stage != StagePanic) {
		return false
	}
	r := e.ObjectRef
	return c.fieldRules.Selects(r.Group, r.Version, r.Resource, r.Subresource, e.Verb)
}

// cell is where in its subject's counts e is counted, within the hour.
func (c *Classifier) cell(o Origin, e *Event, hour time.Time) countkey.Cell {
	return countkey.Cell{
		Hour: hour,
		// Node names come from the sender (a webhook path, a Kafka
		// field): bounded like the DNS subdomains real ones are.
		Node:        countkey.Truncate(o.Node, countkey.MaxNodeBytes),
		Subresource: e.ObjectRef.Subresource,
		Username:    countkey.Truncate(e.Username, countkey.MaxUsernameBytes),
		UserAgent:   c.userAgent(e.UserAgent),
		// Unknown verbs are one: a sender can invent them without end,
		// and the API reports them as "other" anyway.
		Verb:   cardinality.Verb(e.Verb),
		DryRun: e.DryRun,
	}
}

// FieldRequests are the matches of field rules: the deprecated fields a completed request sets, each
// once per request like an API.
func (c *Classifier) FieldRequests(o Origin, e *Event, now time.Time) []countkey.Request {
	if c.fieldRules == nil || e.ObjectRef == nil || len(e.RequestObject) == 0 ||
		(e.Stage != StageResponseComplete && e.Stage != StagePanic) {
		return nil
	}
	ref := e.ObjectRef
	if refTooLong(ref) {
		return nil
	}
	matches := c.fieldRules.Match(ref.Group, ref.Version, ref.Resource, ref.Subresource, e.Verb, e.RequestObject)
	if len(matches) == 0 {
		return nil
	}
	hour, res := c.countedHour(e, now)
	if res != ResultCounted {
		return nil
	}
	cell := c.cell(o, e, hour)
	out := make([]countkey.Request, 0, len(matches))
	id := e.identity()
	for _, r := range matches {
		out = append(out, countkey.Request{
			ID:             fieldRuleID(id, r.Name),
			LegacyID:       fieldRuleID(e.ID, r.Name),
			Key:            countkey.CountKey{Cluster: originCluster(o), Cell: cell},
			FieldRule:      r.Name,
			RemovedRelease: r.RemovedIn,
			Seen:           sighting(e, now),
		})
	}
	return out
}

// lifecycle decides whether a completed request counts, and how:
//
//   - With the k8s.io/deprecated annotation it counts; the removed release is
//     the annotation's, else the catalog's.
//   - Without it, a 404 from an API the catalog lists as removed is an
//     already-removed request (unless the cluster's configured version still
//     serves the API: then the 404 is just a missing object).
//   - Without it, when the cluster's version is configured, an API the
//     catalog lists as deprecated at or before that version counts: this is
//     how apiservers older than 1.19, which never annotate, are covered.
func (c *Classifier) lifecycle(cluster string, e *Event) (removedRelease string, removed, counts bool) {
	ref := e.ObjectRef
	entry, known := c.catalog.Lookup(ref.Group, ref.Version, ref.Resource)
	if e.Deprecated {
		if e.RemovedRelease != "" || !known {
			return e.RemovedRelease, false, true
		}
		return entry.RemovedIn, false, true
	}
	if !known {
		return "", false, false
	}
	version, versionKnown := c.versions[cluster]
	rem, dep := entry.Removed(), entry.Deprecated()
	if e.ResponseCode == 404 && !rem.IsZero() && (!versionKnown || !version.Less(rem)) {
		return entry.RemovedIn, true, true
	}
	if versionKnown && !dep.IsZero() && !version.Less(dep) {
		return entry.RemovedIn, false, true
	}
	return "", false, false
}

func (c *Classifier) userAgent(ua string) string {
	if c.uaMode == UserAgentShort {
		if i := strings.IndexByte(ua, ' '); i >= 0 {
			ua = ua[:i]
		}
	}
	return countkey.Truncate(ua, countkey.MaxUserAgentBytes)
}

// Expired reports whether hour is past the retention: the store's
// (Options.Expired), or without one (a client-side dry run) the configured
// retention applied the same way.
func (c *Classifier) Expired(hour, now time.Time) bool {
	if c.expired != nil {
		return c.expired(hour)
	}
	return !hour.Add(c.retention + time.Hour).After(now)
}

// sighting is who was behind a request, for workload attribution.
func sighting(e *Event, now time.Time) *countkey.Sighting {
	if e.PodName == "" && len(e.SourceIPs) == 0 && e.ImpersonatedBy == "" {
		return nil
	}
	at := e.RequestReceived
	if at.IsZero() {
		at = cmp.Or(e.StageTime, now)
	}
	return &countkey.Sighting{PodName: countkey.Truncate(e.PodName, maxPodNameBytes), PodNode: countkey.Truncate(e.PodNode, countkey.MaxNodeBytes),
		SourceIPs: sourceIPs(e.SourceIPs), ImpersonatedBy: countkey.Truncate(e.ImpersonatedBy, countkey.MaxUsernameBytes), At: at.UTC()}
}

// maxPodNameBytes is the longest pod name Kubernetes allows (a DNS
// subdomain); maxIPBytes is far above the longest IPv6 address.
const (
	maxPodNameBytes = 253
	maxIPBytes      = 64
)

// sourceIPs is what a sighting keeps of an event's sourceIPs: at most
// MaxSourceIPs, the last (the address the apiserver saw itself) first,
// then the forwarded ones in their order. kube-apiserver lists the
// caller's X-Forwarded-For addresses before its own view, so a caller
// that sends ten forged ones would otherwise never be seen with its real
// address. Values too long to be an address are left out.
func sourceIPs(ips []string) []string {
	if len(ips) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(ips), countkey.MaxSourceIPs))
	if last := ips[len(ips)-1]; len(last) <= maxIPBytes {
		out = append(out, last)
	}
	for _, ip := range ips[:len(ips)-1] {
		if len(out) == countkey.MaxSourceIPs {
			break
		}
		if len(ip) <= maxIPBytes {
			out = append(out, ip)
		}
	}
	return out
}

// originCluster is the cluster of o as counted: bounded like a DNS
// subdomain, as it comes from the sender (a webhook path, a Kafka field).
func originCluster(o Origin) string { return countkey.Truncate(o.Cluster, countkey.MaxClusterBytes) }

// refTooLong reports an API name part longer than Kubernetes allows: a
// group is a DNS subdomain, a version and a resource DNS labels.
func refTooLong(ref *ObjectRef) bool {
	return len(ref.Group) > countkey.MaxGroupBytes || len(ref.Version) > countkey.MaxVersionBytes ||
		len(ref.Resource) > countkey.MaxResourceBytes || len(ref.Subresource) > countkey.MaxSubresourceBytes
}
