package classify

import (
	"time"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/countkey"
)

type webhookKey struct {
	t                      admission.Type
	configuration, webhook string
}

// AdmissionRequest builds the admission counts of one event: a row for the
// resource's totals and one per webhook called. ok is false when the event
// has nothing to count here.
func (c *Classifier) AdmissionRequest(o Origin, e *Event, now time.Time) (countkey.Request, bool) {
	f := e.Admission
	if f == nil || (e.Stage != StageResponseComplete && e.Stage != StagePanic) || e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		return countkey.Request{}, false
	}
	hour, res := c.countedHour(e, now)
	if res != ResultCounted {
		return countkey.Request{}, false
	}
	c.resolver.Resolve(f)
	ref := e.ObjectRef
	base := countkey.AdmissionKey{Hour: hour, Cluster: originCluster(o), Group: countkey.Truncate(ref.Group, countkey.MaxGroupBytes),
		Version: countkey.Truncate(ref.Version, countkey.MaxVersionBytes), Resource: countkey.Truncate(ref.Resource, countkey.MaxResourceBytes),
		Subresource: countkey.Truncate(ref.Subresource, countkey.MaxSubresourceBytes)}
	total := countkey.AdmissionCounts{Requests: 1}
	if f.Slowed() {
		total.Slow, total.LatencyNanos = 1, uint64(f.Latency())
		total.Buckets[admission.Bucket(f.Latency())] = 1
	}
	perWebhook := map[webhookKey]*countkey.AdmissionCounts{}
	var order []webhookKey
	for _, call := range f.Calls {
		// Webhook and configuration names are the sender's: bounded as
		// the DNS subdomains real ones are.
		k := webhookKey{admission.Type(countkey.Truncate(string(call.Type), countkey.MaxRuleBytes)),
			countkey.Truncate(call.Configuration, countkey.MaxRuleBytes), countkey.Truncate(call.Webhook, countkey.MaxRuleBytes)}
		wc, ok := perWebhook[k]
		if !ok {
			wc = &countkey.AdmissionCounts{Requests: 1}
			latency := f.MutatingLatency
			if call.Type == admission.Validating {
				latency = f.ValidatingLatency
			}
			// A webhook's latency is that of every webhook of its kind on
			// the request: the apiserver does not split it further.
			if latency > 0 {
				wc.Slow, wc.LatencyNanos = 1, uint64(latency)
				wc.Buckets[admission.Bucket(latency)] = 1
			}
			perWebhook[k] = wc
			order = append(order, k)
		}
		wc.Calls++
		total.Calls++
		if call.Mutated {
			wc.Mutations++
			total.Mutations++
		}
		if call.FailedOpen {
			wc.FailedOpen++
			total.FailedOpen++
		}
	}
	rows := make([]countkey.AdmissionRow, 0, 1+len(order)+len(f.Certificates))
	rows = append(rows, countkey.AdmissionRow{Key: base, Counts: total})
	for _, k := range order {
		key := base
		key.Type, key.Configuration, key.Webhook = string(k.t), k.configuration, k.webhook
		rows = append(rows, countkey.AdmissionRow{Key: key, Counts: *perWebhook[k]})
	}
	for _, issue := range f.Certificates {
		key := base
		key.Type, key.Configuration = string(issue.Problem), countkey.Truncate(issue.Host, countkey.MaxRuleBytes)
		rows = append(rows, countkey.AdmissionRow{Key: key, Counts: countkey.AdmissionCounts{Requests: 1}})
	}
	return countkey.Request{ID: e.identity(), LegacyID: e.ID, Key: countkey.CountKey{Cluster: originCluster(o), Cell: countkey.Cell{Hour: hour}}, Admission: rows}, true
}
