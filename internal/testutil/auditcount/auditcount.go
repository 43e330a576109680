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
	"slices"
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
