package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/kube-sunset/sunset/internal/httpjson"
)

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

const infoPath = "/apis/" + APIVersion + "/serverinfo"

// Info describes the service; retention is what the store keeps.
func (s *Service) Info(retention time.Duration) ServerInfo {
	out := ServerInfo{APIVersion: APIVersion, Kind: "ServerInfo", Time: s.now().UTC(), Retention: retention.String(), Clusters: []string{}}
	add := func(cluster string) {
		if !slices.Contains(out.Clusters, cluster) {
			out.Clusters = append(out.Clusters, cluster)
		}
	}
	for _, info := range s.q.APIs() {
		add(info.Cluster)
	}
	for _, info := range s.q.FieldRules() {
		add(info.Cluster)
	}
	slices.Sort(out.Clusters)
	return out
}

func (h *Handler) serveInfo(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.begin(w, r, GroupVersion.WithResource("serverinfo").GroupResource(), nil, nil); !ok {
		return
	}
	httpjson.Write(w, http.StatusOK, h.svc.Info(h.maxSince))
}
