package api

import (
	"net/http"
	"slices"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/httpjson"
)

const infoPath = "/apis/" + sunsetv1.APIVersion + "/serverinfo"

// infoParams are serverinfo's parameters: only pretty, as on every other
// path.
var infoParams = []string{"pretty"}

// Info describes the service; retention is what the store keeps.
func (s *Service) Info(retention time.Duration) sunsetv1.ServerInfo {
	out := sunsetv1.ServerInfo{APIVersion: sunsetv1.APIVersion, Kind: "ServerInfo", Time: s.now().UTC(), Retention: retention.String(), Clusters: []string{}}
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
	if _, ok := h.begin(w, r, GroupVersion.WithResource("serverinfo").GroupResource(), nil, infoParams); !ok {
		return
	}
	httpjson.WriteFor(w, r, http.StatusOK, h.svc.Info(h.maxSince))
}
