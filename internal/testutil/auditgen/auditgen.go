// Package auditgen writes synthetic audit.k8s.io/v1 events shaped like the
// ones kube-apiserver sends at Metadata level, for benchmarks and tests
// that need more traffic than the real captures hold.
//
// Events are about 1.2 KB, each with a fresh auditID, a pod-bound
// service-account token (user.extra) and the authorization annotations the
// apiserver adds. Every DeprecatedEvery-th event is a list of the
// deprecated core/v1 Endpoints, annotated as the apiserver annotates it;
// the rest are ordinary requests to current APIs.
package auditgen

import (
	"fmt"
	"strconv"
	"time"
)

// Options shapes a stream of events.
type Options struct {
	// Prefix starts every auditID, so that runs do not collide.
	Prefix string
	// DeprecatedEvery makes every nth event a deprecated request; 0 means
	// none. 33 gives the 3 % of the performance targets.
	DeprecatedEvery int
	// Users is how many service accounts send; 0 means 1,000.
	Users int
	// At is the requests' time.
	At time.Time
}

// Deprecated reports whether event i of a stream with these options is a
// deprecated request.
func (o Options) Deprecated(i int) bool {
	return o.DeprecatedEvery > 0 && i%o.DeprecatedEvery == 0
}

// CountDeprecated is how many of events [from, to) are deprecated requests.
func (o Options) CountDeprecated(from, to int) int {
	n := 0
	for i := from; i < to; i++ {
		if o.Deprecated(i) {
			n++
		}
	}
	return n
}

var current = []struct{ group, version, resource, verb string }{
	{"apps", "v1", "deployments", "get"},
	{"", "v1", "pods", "list"},
	{"", "v1", "configmaps", "watch"},
	{"coordination.k8s.io", "v1", "leases", "update"},
	{"discovery.k8s.io", "v1", "endpointslices", "list"},
}

// Append appends event i, as JSON, to b.
func (o Options) Append(b []byte, i int) []byte {
	users := o.Users
	if users <= 0 {
		users = 1000
	}
	user := i % users
	ns := "team-" + strconv.Itoa(user%50)
	sa := "sa-" + strconv.Itoa(user)
	group, version, resource, verb := "", "v1", "endpoints", "list"
	uri := "/api/v1/namespaces/" + ns + "/endpoints"
	annotations := `"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by RoleBinding \"` + sa + `/` + ns + `\" of ClusterRole \"view\" to ServiceAccount \"` + sa + `/` + ns + `\""`
	if o.Deprecated(i) {
		annotations += `,"k8s.io/deprecated":"true"`
	} else {
		c := current[i%len(current)]
		group, version, resource, verb = c.group, c.version, c.resource, c.verb
		if group == "" {
			uri = "/api/v1/namespaces/" + ns + "/" + resource
		} else {
			uri = "/apis/" + group + "/" + version + "/namespaces/" + ns + "/" + resource
		}
	}
	at := o.At.Add(time.Duration(i%3600) * time.Millisecond).UTC().Format("2006-01-02T15:04:05.000000Z")
	b = fmt.Appendf(b, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"%s-%08d-4e5f-8a9b-%012d","stage":"ResponseComplete",`+
		`"requestURI":%q,"verb":%q,"user":{"username":"system:serviceaccount:%s:%s","uid":"7d3c4f5e-%04d-4a1b-9c2d-3e4f5a6b7c8d","groups":["system:serviceaccounts","system:serviceaccounts:%s","system:authenticated"],`+
		`"extra":{"authentication.kubernetes.io/node-name":["node-%d"],"authentication.kubernetes.io/pod-name":["%s-7d9f8b6c5-x%04d"],"authentication.kubernetes.io/pod-uid":["1a2b3c4d-5e6f-4a7b-8c9d-%012d"]}},`+
		`"sourceIPs":["10.244.%d.%d"],"userAgent":"controller/v1.32.4 (linux/amd64) kubernetes/6cd4d7e","objectRef":{"resource":%q,"namespace":%q,"apiGroup":%q,"apiVersion":%q},`+
		`"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":%q,"stageTimestamp":%q,"annotations":{%s}}`,
		o.Prefix, i/1000000, i%1000000, uri, verb, ns, sa, user%10000, ns, user%20, sa, user%10000, user,
		user/250, user%250, resource, ns, group, version, at, at, annotations)
	return b
}

// List returns an EventList of events [from, to), as the webhook sends it.
func (o Options) List(from, to int) []byte {
	b := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`)
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		b = o.Append(b, i)
	}
	return append(b, "]}"...)
}
