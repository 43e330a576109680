package v1

import "time"

// ServerInfo describes what a server can answer: the limits of ?since=
// and ?cluster=, and the clock every window is relative to.
type ServerInfo struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Time is the server's clock: "now" for windows and last24h.
	Time time.Time `json:"time"`
	// Retention is how long counts are kept, e.g. "720h0m0s": the
	// longest ?since=.
	Retention string `json:"retention"`
	// Clusters are those with counts within the retention, sorted.
	Clusters []string `json:"clusters"`
}
