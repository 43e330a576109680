package v1

import "time"

// GateOverride is an upgrade the gate let through, refused by the
// verdict, because the object carried the annotation
// sunset.dev/upgrade-override.
type GateOverride struct {
	Time    time.Time `json:"time"`
	Cluster string    `json:"cluster"`
	// Source is admission (the admission webhook) or capi (Cluster API's
	// hooks).
	Source    string `json:"source"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// User made the change, as the AdmissionReview says; empty for
	// Cluster API.
	User string `json:"user,omitempty"`
	// Reason is the annotation's value, up to 1 KiB.
	Reason string `json:"reason"`
	From   string `json:"fromVersion"`
	To     string `json:"toVersion"`
}
