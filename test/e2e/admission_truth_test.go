package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// webhookOnResource is one webhook, named as Sunset names it
// (configuration.webhook, or the webhook alone when the annotations do not
// name its configuration), on one resource, named as APIRequestCount names
// it with "/subresource" when there is one.
type webhookOnResource struct{ Webhook, Resource string }

// admissionCounts are the numbers both sides report.
type admissionCounts struct {
	Requests, Calls, Mutations, FailedOpen, Slow int64
	LatencySeconds                               float64
	// Buckets: up to 0.5 s, 1 s, 2 s, 5 s, 10 s, and above.
	Buckets [6]int64
}

type admissionTally struct {
	webhooks  map[webhookOnResource]admissionCounts
	resources map[string]admissionCounts
}

// The audit annotation keys, as kube-apiserver v1.36 writes them.
const (
	mutationPrefix            = "mutation.webhook.admission.k8s.io/"
	failedOpenMutatingPrefix  = "failed-open.mutation.webhook.admission.k8s.io/"
	failedOpenValidatingPrefx = "failed-open.validating.webhook.admission.k8s.io/"
	mutatingLatencyKey        = "apiserver.latency.k8s.io/mutating-webhook"
	validatingLatencyKey      = "apiserver.latency.k8s.io/validating-webhook"
)

// sums is a tally in nanoseconds, turned into admissionCounts at the end
// the way Sunset does, so latencies compare exactly.
type sums struct {
	admissionCounts
	nanos int64
}

func (s *sums) add(calls, mutations, failedOpen int64, latency time.Duration) {
	s.Requests++
	s.Calls += calls
	s.Mutations += mutations
	s.FailedOpen += failedOpen
	if latency > 0 {
		s.Slow++
		s.nanos += int64(latency)
		s.Buckets[latencyBucket(latency)]++
	}
}

func latencyBucket(d time.Duration) int {
	for i, bound := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second} {
		if d <= bound {
			return i
		}
	}
	return 5
}

// admissionTruth reads kube-apiserver's own audit log: every request at
// ResponseComplete or Panic, with its webhook annotations. It also counts
// the deprecated gadgets.v1beta1 requests.
func admissionTruth(t *testing.T, path string) (admissionTally, int64) {
	t.Helper()
	webhooks, resources := map[webhookOnResource]*sums{}, map[string]*sums{}
	var deprecatedGadgets int64
	eachCompleted(t, path, func(ev *auditEvent) {
		resource := ev.resource()
		if resource == "" {
			return
		}
		if ev.Annotations["k8s.io/deprecated"] == "true" && resource == "gadgets.v1beta1."+gadgetGroup {
			deprecatedGadgets++
		}
		if ev.ObjectRef.Subresource != "" {
			resource += "/" + ev.ObjectRef.Subresource
		}
		addRequest(t, ev.Annotations, resource, webhooks, resources)
	})
	out := admissionTally{webhooks: map[webhookOnResource]admissionCounts{}, resources: map[string]admissionCounts{}}
	for k, s := range webhooks {
		s.LatencySeconds = time.Duration(s.nanos).Seconds()
		out.webhooks[k] = s.admissionCounts
	}
	for k, s := range resources {
		s.LatencySeconds = time.Duration(s.nanos).Seconds()
		out.resources[k] = s.admissionCounts
	}
	return out, deprecatedGadgets
}

// addRequest adds one request's webhook annotations.
func addRequest(t *testing.T, ann map[string]string, resource string, webhooks map[webhookOnResource]*sums, resources map[string]*sums) {
	t.Helper()
	latency := map[string]time.Duration{}
	for _, key := range []string{mutatingLatencyKey, validatingLatencyKey} {
		if v, ok := ann[key]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s %q: %v", key, v, err)
			}
			latency[key] = d
		}
	}
	type call struct {
		name, latencyKey    string
		mutated, failedOpen bool
	}
	bySlot := map[string]*call{}
	for key, v := range ann {
		switch {
		case strings.HasPrefix(key, failedOpenMutatingPrefix):
			slot := "m/" + strings.TrimPrefix(key, failedOpenMutatingPrefix)
			if bySlot[slot] == nil {
				bySlot[slot] = &call{name: v, latencyKey: mutatingLatencyKey}
			}
			bySlot[slot].failedOpen = true
		case strings.HasPrefix(key, failedOpenValidatingPrefx):
			bySlot["v/"+strings.TrimPrefix(key, failedOpenValidatingPrefx)] = &call{name: v, latencyKey: validatingLatencyKey, failedOpen: true}
		case strings.HasPrefix(key, mutationPrefix):
			var m struct {
				Configuration, Webhook string
				Mutated                bool
			}
			if err := json.Unmarshal([]byte(v), &m); err != nil {
				t.Fatalf("%s %q: %v", key, v, err)
			}
			slot := "m/" + strings.TrimPrefix(key, mutationPrefix)
			c := bySlot[slot]
			if c == nil {
				c = &call{latencyKey: mutatingLatencyKey}
				bySlot[slot] = c
			}
			c.name, c.mutated = m.Configuration+"."+m.Webhook, m.Mutated
		}
	}
	if len(bySlot) == 0 && len(latency) == 0 {
		return
	}
	var calls, mutations, failedOpen int64
	perWebhook := map[string]*struct {
		calls, mutations, failedOpen int64
		latency                      time.Duration
	}{}
	for _, c := range bySlot {
		w := perWebhook[c.name]
		if w == nil {
			w = &struct {
				calls, mutations, failedOpen int64
				latency                      time.Duration
			}{latency: latency[c.latencyKey]}
			perWebhook[c.name] = w
		}
		w.calls++
		calls++
		if c.mutated {
			w.mutations++
			mutations++
		}
		if c.failedOpen {
			w.failedOpen++
			failedOpen++
		}
	}
	for name, w := range perWebhook {
		k := webhookOnResource{name, resource}
		if webhooks[k] == nil {
			webhooks[k] = &sums{}
		}
		webhooks[k].add(w.calls, w.mutations, w.failedOpen, w.latency)
	}
	if resources[resource] == nil {
		resources[resource] = &sums{}
	}
	resources[resource].add(calls, mutations, failedOpen, latency[mutatingLatencyKey]+latency[validatingLatencyKey])
}

// The parts of Sunset's WebhookCountList the comparison reads.
type sunsetWebhookCounts struct {
	Name                  string  `json:"name"`
	Subresource           string  `json:"subresource"`
	RequestCount          int64   `json:"requestCount"`
	CallCount             int64   `json:"callCount"`
	MutationCount         int64   `json:"mutationCount"`
	FailedOpenCount       int64   `json:"failedOpenCount"`
	SlowRequestCount      int64   `json:"slowRequestCount"`
	WebhookLatencySeconds float64 `json:"webhookLatencySeconds"`
	LatencyBuckets        struct {
		UpTo500ms int64 `json:"upTo0.5s"`
		UpTo1s    int64 `json:"upTo1s"`
		UpTo2s    int64 `json:"upTo2s"`
		UpTo5s    int64 `json:"upTo5s"`
		UpTo10s   int64 `json:"upTo10s"`
		Over10s   int64 `json:"over10s"`
	} `json:"latencyBuckets"`
}

func (c sunsetWebhookCounts) key() string {
	if c.Subresource == "" {
		return c.Name
	}
	return c.Name + "/" + c.Subresource
}

func (c sunsetWebhookCounts) counts() admissionCounts {
	b := c.LatencyBuckets
	return admissionCounts{Requests: c.RequestCount, Calls: c.CallCount, Mutations: c.MutationCount, FailedOpen: c.FailedOpenCount,
		Slow: c.SlowRequestCount, LatencySeconds: c.WebhookLatencySeconds, Buckets: [6]int64{b.UpTo500ms, b.UpTo1s, b.UpTo2s, b.UpTo5s, b.UpTo10s, b.Over10s}}
}

// sunsetAdmission reads Sunset's webhook counts of the last 24 hours, all
// or of one class.
func sunsetAdmission(t *testing.T, s *sunsetServer, class string) admissionTally {
	t.Helper()
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status struct {
				ByResource []sunsetWebhookCounts `json:"byResource"`
			} `json:"status"`
		} `json:"items"`
		Resources []sunsetWebhookCounts `json:"resources"`
	}
	q := url.Values{}
	if class != "" {
		q.Set("class", class)
	}
	getSunsetJSON(t, s, "/apis/sunset.dev/v1/webhookcounts?"+q.Encode(), &list)
	if list.Kind != "WebhookCountList" {
		t.Fatalf("webhookcounts: kind %q", list.Kind)
	}
	out := admissionTally{webhooks: map[webhookOnResource]admissionCounts{}, resources: map[string]admissionCounts{}}
	for _, it := range list.Items {
		for _, r := range it.Status.ByResource {
			out.webhooks[webhookOnResource{it.Metadata.Name, r.key()}] = r.counts()
		}
	}
	for _, r := range list.Resources {
		out.resources[r.key()] = r.counts()
	}
	return out
}

// sunsetRequestCount reads an APIRequestCount's requests in the last 24
// hours.
func sunsetRequestCount(t *testing.T, s *sunsetServer, name string) int64 {
	t.Helper()
	var obj struct {
		Status struct {
			RequestCount int64 `json:"requestCount"`
		} `json:"status"`
	}
	getSunsetJSON(t, s, "/apis/sunset.dev/v1/apirequestcounts/"+name, &obj)
	return obj.Status.RequestCount
}

func getSunsetJSON(t *testing.T, s *sunsetServer, path string, out any) {
	t.Helper()
	resp, err := s.client.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
