package webhook

import (
	"time"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
)

// Response is the body of a 200 answer. kube-apiserver ignores it; it is
// there for people testing their setup with curl.
type Response struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	classify.Summary
	Invalid int `json:"invalid"`
	// Errors lists the first malformed items, by index in the list.
	Errors []ItemError `json:"errors,omitempty"`
}

// DryRunResponse is the body of a 200 answer to ?dryRun=All: what each
// event would have become. Nothing was stored.
type DryRunResponse struct {
	Response
	DryRun bool           `json:"dryRun"`
	Events []PlannedEvent `json:"events"`
}

// PlannedEvent is what one well-formed event would have become.
type PlannedEvent struct {
	AuditID string `json:"auditID"`
	// Result is counted, duplicate, or why it is skipped: skipped_stage,
	// not_deprecated, no_object_ref, expired, future.
	Result         string `json:"result"`
	API            string `json:"api,omitempty"`
	Subresource    string `json:"subresource,omitempty"`
	Hour           string `json:"hour,omitempty"`
	Node           string `json:"node,omitempty"`
	Username       string `json:"username,omitempty"`
	UserAgent      string `json:"userAgent,omitempty"`
	Verb           string `json:"verb,omitempty"`
	RemovedRelease string `json:"removedRelease,omitempty"`
	// AlreadyRemoved marks a request to an API that was already removed.
	AlreadyRemoved bool `json:"alreadyRemoved,omitempty"`
	// Admission is what the admission webhook counter would do: counted
	// or duplicate; empty when the event has no webhook annotations.
	Admission string `json:"admission,omitempty"`
}

// ItemError describes one malformed item without quoting it.
type ItemError struct {
	Index   int    `json:"index"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// NewPlannedEvent describes what planning decided for one event.
func NewPlannedEvent(p aggregate.Planned) PlannedEvent {
	pe := PlannedEvent{AuditID: p.ID, Result: string(p.Result), Admission: string(p.Admission)}
	if p.Result == classify.ResultCounted {
		k := p.Key
		pe.API, pe.Subresource, pe.Hour, pe.Node = k.API, k.Subresource, k.Hour.Format(time.RFC3339), k.Node
		pe.Username, pe.UserAgent, pe.Verb = k.Username, k.UserAgent, k.Verb
		pe.RemovedRelease, pe.AlreadyRemoved = p.RemovedRelease, k.Removed
	}
	return pe
}
