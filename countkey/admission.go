package countkey

import "time"

// AdmissionBuckets is the number of latency buckets an AdmissionCounts
// holds. The store does not know their bounds.
const AdmissionBuckets = 6

// AdmissionKey identifies one cell of admission webhook counts: one
// resource of one cluster in one UTC hour, and one webhook. A key with
// empty Type, Configuration and Webhook holds the resource's totals over
// all webhooks.
type AdmissionKey struct {
	Hour                                  time.Time
	Cluster                               string
	Group, Version, Resource, Subresource string
	Type, Configuration, Webhook          string
}

// IsTotal reports whether k holds a resource's totals over all webhooks.
func (k AdmissionKey) IsTotal() bool { return k.Type == "" && k.Configuration == "" && k.Webhook == "" }

// AdmissionCounts are the counts of one cell.
type AdmissionCounts struct {
	// Requests with any webhook annotation.
	Requests uint64
	// Calls, Mutations and FailedOpen count webhook calls.
	Calls, Mutations, FailedOpen uint64
	// Slow counts requests that carried webhook latency, LatencyNanos sums
	// it, and Buckets spreads those requests by it.
	Slow         uint64
	LatencyNanos uint64
	Buckets      [AdmissionBuckets]uint64
}

// Add adds o to c.
func (c *AdmissionCounts) Add(o AdmissionCounts) {
	c.Requests += o.Requests
	c.Calls += o.Calls
	c.Mutations += o.Mutations
	c.FailedOpen += o.FailedOpen
	c.Slow += o.Slow
	c.LatencyNanos += o.LatencyNanos
	for i := range c.Buckets {
		c.Buckets[i] += o.Buckets[i]
	}
}

// AdmissionRow adds Counts to the cell Key; Key.Cluster and Key.Hour must
// be the request's.
type AdmissionRow struct {
	Key    AdmissionKey
	Counts AdmissionCounts
}
