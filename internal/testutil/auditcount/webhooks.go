package auditcount

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"
)

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
