// Package auditcount counts audit events the way docs/counting.md says Sunset
// counts them ("How counting works", "Admission webhooks"), with nothing
// of Sunset's own: events are decoded with encoding/json into maps, and
// every rule is written out again here. Tests hold golden files and
// Sunset's answers against these counts, so that a golden file cannot
// quietly record a wrong number.
//
// The rules followed:
//
//   - A request counts once per cluster, by auditID (by its bytes without
//     one), from its ResponseComplete or Panic event.
//   - It counts as deprecated when it carries k8s.io/deprecated: "true".
//     Without it, a 404 from an API the catalog lists as removed counts as
//     already removed, unless the cluster's configured version still
//     serves the API; and when the cluster's version is configured, an API
//     the catalog lists as deprecated at or before it counts.
//   - Its hour is the UTC hour of requestReceivedTimestamp, else of
//     stageTimestamp. The API is resource.version.group, the core group
//     having none. The user agent is kept up to its first space; a request
//     made with impersonation counts under the impersonated user. A dry
//     run has dryRun=All in its URI's query (or, for a DELETE, in its
//     DeleteOptions).
//   - Webhooks: a mutation annotation is a call of its webhook, a mutation
//     when mutated; a failed-open annotation marks the call of its slot
//     (mutating) or is a call (validating) that failed open; a webhook's
//     latency on a request is that of its kind; a resource's is the sum of
//     both kinds. Values that do not parse are ignored.
//
// It is for tests only; production code must not import it.
package auditcount

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-sunset/sunset/catalog"
)

// Options are what the rules need to know beyond the events.
type Options struct {
	// SystemUsers are the usernames that are system traffic.
	SystemUsers []string
	// Lifecycle returns the releases that deprecate and remove an API, ""
	// for none (the lifecycle catalog).
	Lifecycle func(group, version, resource string) (deprecatedIn, removedIn string)
	// ClusterVersions are the clusters' configured versions, "1.15".
	ClusterVersions map[string]string
	// ValidatingConfigurations gives the configuration of validating
	// webhooks by webhook name (admission.webhooks).
	ValidatingConfigurations map[string]string
}

// Request is one counted request.
type Request struct {
	Cluster, Node string
	// API is resource.version.group: endpoints.v1, cronjobs.v1beta1.batch.
	API                       string
	Username, UserAgent, Verb string
	Hour                      time.Time
	// RemovedIn is the k8s.io/removed-release annotation, else the
	// catalog's.
	RemovedIn               string
	System, Removed, DryRun bool
}

// WebhookCounts are the counts of a webhook or a resource.
type WebhookCounts struct {
	Requests, Calls, Mutations, FailedOpen, Slow int64
	Latency                                      time.Duration
}

// Add adds o to w.
func (w *WebhookCounts) Add(o WebhookCounts) {
	w.Requests += o.Requests
	w.Calls += o.Calls
	w.Mutations += o.Mutations
	w.FailedOpen += o.FailedOpen
	w.Slow += o.Slow
	w.Latency += o.Latency
}

// WebhookRequest is what one request says about one webhook, or (Webhook
// empty) about its resource.
type WebhookRequest struct {
	Cluster, Node string
	// Resource is resource.version.group, as for Request.API.
	Resource string
	// Webhook is configuration.webhook, or the webhook alone when its
	// configuration is unknown; Type is mutating or validating.
	Webhook, Type string
	Hour          time.Time
	WebhookCounts
}

// Counter counts events.
type Counter struct {
	opts Options
	seen map[[2]string]bool
	// Requests are the requests that count, in the order met.
	Requests []Request
	// Webhooks has an entry per request and webhook called on it, and
	// one per request with webhook annotations for its resource.
	Webhooks []WebhookRequest
}

// New returns an empty counter.
func New(o Options) *Counter {
	if o.Lifecycle == nil {
		o.Lifecycle = func(string, string, string) (string, string) { return "", "" }
	}
	return &Counter{opts: o, seen: map[[2]string]bool{}}
}

// event is the part of an audit event the rules read.
type event struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time         `json:"requestReceivedTimestamp"`
	Stage2          time.Time         `json:"stageTimestamp"`
	Annotations     map[string]string `json:"annotations"`
	RequestObject   json.RawMessage   `json:"requestObject"`
}

// Add counts one event, as JSON, received from node of cluster.
func (c *Counter) Add(t testing.TB, cluster, node string, raw []byte) {
	t.Helper()
	var e event
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("auditcount: %v: %s", err, raw)
	}
	if e.Stage != "ResponseComplete" && e.Stage != "Panic" {
		return
	}
	id := e.AuditID
	if id == "" {
		id = "bytes:" + string(raw)
	}
	if c.seen[[2]string{cluster, id}] {
		return
	}
	c.seen[[2]string{cluster, id}] = true
	if e.ObjectRef == nil {
		return
	}
	hour := e.RequestReceived
	if hour.IsZero() {
		hour = e.Stage2
	}
	hour = hour.UTC().Truncate(time.Hour)
	ref := e.ObjectRef
	name := ref.Resource + "." + ref.APIVersion
	if ref.APIGroup != "" {
		name += "." + ref.APIGroup
	}
	c.webhooks(cluster, node, name, hour, e.Annotations)

	deprecatedIn, removedIn := c.opts.Lifecycle(ref.APIGroup, ref.APIVersion, ref.Resource)
	version, versionKnown := c.opts.ClusterVersions[cluster]
	annotated := e.Annotations["k8s.io/deprecated"] == "true"
	removed := !annotated && e.ResponseStatus != nil && e.ResponseStatus.Code == 404 && removedIn != "" &&
		(!versionKnown || !ReleaseLess(version, removedIn))
	deprecated := annotated || (versionKnown && deprecatedIn != "" && !ReleaseLess(version, deprecatedIn))
	if !deprecated && !removed {
		return
	}
	if r := e.Annotations["k8s.io/removed-release"]; annotated && r != "" {
		removedIn = r
	}
	user := e.User.Username
	if e.ImpersonatedUser != nil {
		user = e.ImpersonatedUser.Username
	}
	agent, _, _ := strings.Cut(e.UserAgent, " ")
	dryRun := false
	if _, query, ok := strings.Cut(e.RequestURI, "?"); ok {
		q, _ := url.ParseQuery(query)
		dryRun = slices.Contains(q["dryRun"], "All")
	}
	if e.Verb == "delete" && len(e.RequestObject) > 0 {
		var o struct {
			Kind   string   `json:"kind"`
			DryRun []string `json:"dryRun"`
		}
		dryRun = dryRun || json.Unmarshal(e.RequestObject, &o) == nil && o.Kind == "DeleteOptions" && slices.Contains(o.DryRun, "All")
	}
	c.Requests = append(c.Requests, Request{Cluster: cluster, Node: node, API: name, Username: user, UserAgent: agent, Verb: e.Verb,
		Hour: hour, RemovedIn: removedIn, System: slices.Contains(c.opts.SystemUsers, user), Removed: removed, DryRun: dryRun})
}

var slotRe = regexp.MustCompile(`^round_[0-9]+_index_[0-9]+$`)

// failedOpenSlot returns the webhook type and slot of a failed-open
// annotation's key, or "" for another key.
func failedOpenSlot(key string) (typ, slot string) {
	if s, ok := strings.CutPrefix(key, "failed-open.mutation.webhook.admission.k8s.io/"); ok {
		return "mutating", s
	}
	if s, ok := strings.CutPrefix(key, "failed-open.validating.webhook.admission.k8s.io/"); ok {
		return "validating", s
	}
	return "", ""
}

// webhooks counts what the annotations say about admission webhooks.
func (c *Counter) webhooks(cluster, node, resource string, hour time.Time, ann map[string]string) {
	type call struct {
		configuration, webhook, typ string
		mutated, failedOpen         bool
	}
	calls := map[string]*call{} // by type and slot
	slot := func(key string) *call {
		if calls[key] == nil {
			calls[key] = &call{}
		}
		return calls[key]
	}
	latency := map[string]time.Duration{}
	found := false
	for key, value := range ann {
		switch {
		case key == "apiserver.latency.k8s.io/mutating-webhook", key == "apiserver.latency.k8s.io/validating-webhook":
			found = true
			if d, err := time.ParseDuration(value); err == nil && d >= 0 {
				latency[strings.TrimSuffix(strings.TrimPrefix(key, "apiserver.latency.k8s.io/"), "-webhook")] = d
			}
		case strings.HasPrefix(key, "mutation.webhook.admission.k8s.io/"):
			found = true
			s := strings.TrimPrefix(key, "mutation.webhook.admission.k8s.io/")
			var m struct {
				Configuration, Webhook string
				Mutated                bool
			}
			if !slotRe.MatchString(s) || json.Unmarshal([]byte(value), &m) != nil || m.Webhook == "" {
				continue
			}
			cl := slot("mutating/" + s)
			cl.configuration, cl.webhook, cl.typ, cl.mutated = m.Configuration, m.Webhook, "mutating", m.Mutated
		default:
			typ, s := failedOpenSlot(key)
			if typ == "" {
				continue
			}
			found = true
			if !slotRe.MatchString(s) || value == "" {
				continue
			}
			cl := slot(typ + "/" + s)
			cl.failedOpen, cl.typ = true, typ
			// A mutating call's name comes from its mutation annotation
			// when there is one; a validating call has only this.
			if cl.webhook == "" {
				cl.webhook = value
			}
			if typ == "validating" {
				cl.configuration = c.opts.ValidatingConfigurations[value]
			}
		}
	}
	if !found {
		return
	}
	var all WebhookCounts
	all.Requests = 1
	if d := latency["mutating"] + latency["validating"]; latency["mutating"] > 0 || latency["validating"] > 0 {
		all.Slow, all.Latency = 1, d
	}
	// A webhook called in several slots (a reinvocation) is one request.
	byWebhook := map[[2]string]*WebhookCounts{}
	var order [][2]string
	for _, cl := range calls {
		name := cl.webhook
		if cl.configuration != "" {
			name = cl.configuration + "." + cl.webhook
		}
		k := [2]string{name, cl.typ}
		w := byWebhook[k]
		if w == nil {
			w = &WebhookCounts{Requests: 1}
			if d := latency[cl.typ]; d > 0 {
				w.Slow, w.Latency = 1, d
			}
			byWebhook[k] = w
			order = append(order, k)
		}
		call := WebhookCounts{Calls: 1}
		if cl.mutated {
			call.Mutations = 1
		}
		if cl.failedOpen {
			call.FailedOpen = 1
		}
		w.Add(call)
		all.Add(call)
	}
	c.Webhooks = append(c.Webhooks, WebhookRequest{Cluster: cluster, Node: node, Resource: resource, Hour: hour, WebhookCounts: all})
	for _, k := range order {
		c.Webhooks = append(c.Webhooks, WebhookRequest{Cluster: cluster, Node: node, Resource: resource, Webhook: k[0], Type: k[1], Hour: hour,
			WebhookCounts: *byWebhook[k]})
	}
}

// AddList counts the items of an EventList, a webhook body.
func (c *Counter) AddList(t testing.TB, cluster, node string, body []byte) {
	t.Helper()
	var list struct{ Items []json.RawMessage }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("auditcount: %v", err)
	}
	for _, it := range list.Items {
		c.Add(t, cluster, node, it)
	}
}

// AddFile counts a log file, one event per line.
func (c *Counter) AddFile(t testing.TB, cluster, node, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("auditcount: %v", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(strings.TrimSpace(sc.Text())) > 0 {
			c.Add(t, cluster, node, sc.Bytes())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("auditcount: %s: %v", path, err)
	}
}

// ByAPI sums the requests keep accepts (nil: all) per API.
func (c *Counter) ByAPI(keep func(Request) bool) map[string]int64 {
	out := map[string]int64{}
	for _, r := range c.Requests {
		if keep == nil || keep(r) {
			out[r.API]++
		}
	}
	return out
}

// Count sums the requests keep accepts (nil: all).
func (c *Counter) Count(keep func(Request) bool) int64 {
	var n int64
	for _, r := range c.Requests {
		if keep == nil || keep(r) {
			n++
		}
	}
	return n
}

// Last24h keeps the requests of last24h: now's UTC hour and the 23
// before it.
func Last24h(now time.Time) func(Request) bool {
	to := now.UTC().Truncate(time.Hour)
	return hours(to.Add(-23*time.Hour), to)
}

// Window keeps the requests of a window of ?since=d: from the hour d
// before now, up to now's hour.
func Window(now time.Time, d time.Duration) func(Request) bool {
	return hours(now.UTC().Add(-d).Truncate(time.Hour), now.UTC().Truncate(time.Hour))
}

// Hour keeps the requests of one hour.
func Hour(h time.Time) func(Request) bool { return hours(h, h) }

func hours(from, to time.Time) func(Request) bool {
	return func(r Request) bool { return !r.Hour.Before(from) && !r.Hour.After(to) }
}

// ReleaseLess compares releases such as "1.15" and "v1.9" by number.
func ReleaseLess(a, b string) bool {
	parse := func(s string) [2]int {
		var r [2]int
		major, minor, _ := strings.Cut(strings.TrimPrefix(s, "v"), ".")
		r[0], _ = strconv.Atoi(major)
		r[1], _ = strconv.Atoi(minor)
		return r
	}
	x, y := parse(a), parse(b)
	return x[0] < y[0] || x[0] == y[0] && x[1] < y[1]
}

// And keeps what every filter keeps.
func And(keep ...func(Request) bool) func(Request) bool {
	return func(r Request) bool {
		for _, k := range keep {
			if !k(r) {
				return false
			}
		}
		return true
	}
}

// NotSystem keeps requests of users that are not system traffic.
func NotSystem(r Request) bool { return !r.System }

// WebhookTotals sums what the requests say per webhook (key
// configuration.webhook) and, under the key "", per resource: one map
// per resource.
func (c *Counter) WebhookTotals() (webhooks map[string]WebhookCounts, resources map[string]WebhookCounts) {
	webhooks, resources = map[string]WebhookCounts{}, map[string]WebhookCounts{}
	for _, w := range c.Webhooks {
		m, k := webhooks, w.Webhook
		if w.Webhook == "" {
			m, k = resources, w.Resource
		}
		sum := m[k]
		sum.Add(w.WebhookCounts)
		m[k] = sum
	}
	return webhooks, resources
}

// BuiltinLifecycle is Options.Lifecycle from the built-in catalog: the
// data the rules read, not Sunset's counting.
func BuiltinLifecycle(t testing.TB) func(group, version, resource string) (string, string) {
	t.Helper()
	entries, err := catalog.Builtin()
	if err != nil {
		t.Fatalf("auditcount: %v", err)
	}
	type gvr struct{ group, version, resource string }
	byGVR := map[gvr][2]string{}
	for _, e := range entries {
		byGVR[gvr{e.Group, e.Version, e.Resource}] = [2]string{e.DeprecatedIn, e.RemovedIn}
	}
	return func(group, version, resource string) (string, string) {
		l := byGVR[gvr{group, version, resource}]
		return l[0], l[1]
	}
}
