package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-sunset/sunset/internal/httpjson"
)

// DeleteResult answers a DELETE: what was (or, in a dry run, would be)
// removed.
type DeleteResult struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Status     string `json:"status"`
	DryRun     bool   `json:"dryRun,omitempty"`
	Details    struct {
		Name  string `json:"name"`
		Group string `json:"group"`
		Kind  string `json:"kind"`
		// Clusters and the requests removed from each.
		Clusters map[string]uint64 `json:"clusters"`
	} `json:"details"`
}

// maxDeleteOptionsBytes bounds the DeleteOptions body kubectl sends.
const maxDeleteOptionsBytes = 64 << 10

// delete resets an API's counts (all clusters, or ?cluster=), after a
// migration: the API then counts again from zero. A dry run (?dryRun=All,
// or dryRun: [All] in the DeleteOptions body, as `kubectl delete
// --dry-run=server` sends) answers the same and removes nothing.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	var problems []string
	for key := range v {
		if key != "cluster" && key != "dryRun" && key != "pretty" {
			problems = append(problems, fmt.Sprintf("unknown parameter %q (known: cluster, dryRun)", key))
		}
	}
	dryRun := false
	if d, ok := v["dryRun"]; ok {
		if len(d) != 1 || d[0] != metav1.DryRunAll {
			problems = append(problems, fmt.Sprintf("dryRun %q is not valid; the only valid value is All", strings.Join(d, ",")))
		}
		dryRun = true
	}
	opts, err := readDeleteOptions(r)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(opts.DryRun) > 0 {
		if len(opts.DryRun) != 1 || opts.DryRun[0] != metav1.DryRunAll {
			problems = append(problems, fmt.Sprintf("dryRun %q is not valid; the only valid value is All", strings.Join(opts.DryRun, ",")))
		}
		dryRun = true
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		httpjson.WriteStatus(w, apierrors.NewBadRequest(strings.Join(problems, "; ")))
		return
	}
	gr := APIRequestCountsResource.GroupResource()
	name, cluster := r.PathValue("name"), v.Get("cluster")
	res := DeleteResult{Kind: "Status", APIVersion: "v1", Status: metav1.StatusSuccess, DryRun: dryRun}
	res.Details.Name, res.Details.Group, res.Details.Kind, res.Details.Clusters = name, gr.Group, gr.Resource, map[string]uint64{}
	for _, info := range h.svc.q.APIs() {
		if info.API != name || (cluster != "" && info.Cluster != cluster) {
			continue
		}
		n, err := h.deleter.DeleteAPI(info.Cluster, name, dryRun)
		if err != nil {
			h.internalError(w, err)
			return
		}
		res.Details.Clusters[info.Cluster] = n
	}
	if len(res.Details.Clusters) == 0 {
		httpjson.WriteStatus(w, notFound(gr, name, "nothing to delete"))
		return
	}
	if !dryRun {
		h.log.Info().Str("api", name).Str("cluster", cluster).Interface("requests", res.Details.Clusters).Msg("counts reset")
	}
	httpjson.WriteFor(w, r, http.StatusOK, res)
}

// readDeleteOptions reads the optional metav1.DeleteOptions body.
func readDeleteOptions(r *http.Request) (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	if r.Body == nil {
		return opts, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxDeleteOptionsBytes+1))
	switch {
	case err != nil:
		return opts, fmt.Errorf("reading the DeleteOptions body: %w", err)
	case len(body) > maxDeleteOptionsBytes:
		return opts, fmt.Errorf("the DeleteOptions body is over %d bytes", maxDeleteOptionsBytes)
	case len(strings.TrimSpace(string(body))) == 0:
		return opts, nil
	}
	if err := json.Unmarshal(body, &opts); err != nil {
		return opts, fmt.Errorf("the body is not a DeleteOptions object: %w", err)
	}
	return opts, nil
}
