// Package api serves Sunset's read API: APIRequestCount objects shaped like
// OpenShift's, under /apis/sunset.dev/v1.
//
//	GET    /apis/sunset.dev/v1/apirequestcounts          APIRequestCountList
//	GET    /apis/sunset.dev/v1/apirequestcounts/{name}   APIRequestCount
//	DELETE /apis/sunset.dev/v1/apirequestcounts/{name}   reset an API's counts
//	GET    /apis/sunset.dev/v1/fieldrequestcounts        FieldRequestCountList
//	GET    /apis/sunset.dev/v1/fieldrequestcounts/{name} FieldRequestCount
//	GET    /apis/sunset.dev/v1/upgradechecks             UpgradeCheckList
//	GET    /apis/sunset.dev/v1/upgradechecks/{release}   UpgradeCheck
//	GET    /apis/sunset.dev/v1/serverinfo                ServerInfo
//
// Service builds the objects from counts, through the small Querier
// interface the package declares; Handler serves them over HTTP. The only
// write is the reset, through the Deleter interface. Check is the upgrade
// gate's logic, here so that `sunset check` and the upgradechecks endpoint
// give one answer.
package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/internal/httpjson"
)

// Options configures New.
type Options struct {
	Querier Querier
	Logger  zerolog.Logger
	// Catalog supplies replacement, warning and removed release; nil means
	// the built-in catalog.
	Catalog *catalog.Catalog
	// IsSystem classifies usernames as system traffic; nil means none is.
	IsSystem func(username string) bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Retention bounds ?since=; zero means unbounded.
	Retention time.Duration
	// Deleter resets counts; nil refuses DELETE.
	Deleter Deleter
	// FieldRules are the deprecated-field rules in force; nil means the
	// built-in ones.
	FieldRules *fieldrule.Set
}

// Deleter removes an API's counts in a cluster and says how many requests
// they held; with dryRun it only counts. *store.Store implements it.
type Deleter interface {
	DeleteAPI(cluster, api string, dryRun bool) (uint64, error)
}

// Handler serves the read API.
type Handler struct {
	svc      *Service
	log      zerolog.Logger
	maxSince time.Duration
	deleter  Deleter
}

// New builds a Handler.
func New(opts Options) *Handler {
	return &Handler{
		svc:      NewService(opts.Querier, opts.Catalog, opts.FieldRules, opts.IsSystem, opts.Now),
		log:      opts.Logger.With().Str("component", "api").Logger(),
		maxSince: opts.Retention,
		deleter:  opts.Deleter,
	}
}

const basePath = "/apis/" + APIVersion + "/apirequestcounts"

// Register adds the API routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc(basePath, h.list)
	mux.HandleFunc(basePath+"/{name}", h.get)
	mux.HandleFunc(fieldsPath, h.listFields)
	mux.HandleFunc(fieldsPath+"/{name}", h.getField)
	mux.HandleFunc(checksPath, h.listChecks)
	mux.HandleFunc(checksPath+"/{name}", h.getCheck)
	mux.HandleFunc(infoPath, h.serveInfo)
}

const fieldsPath = "/apis/" + APIVersion + "/fieldrequestcounts"

func (h *Handler) listFields(w http.ResponseWriter, r *http.Request) {
	serveList(h, w, r, getParams, h.svc.Fields)
}

func (h *Handler) getField(w http.ResponseWriter, r *http.Request) {
	q, ok := h.begin(w, r, getParams)
	if !ok {
		return
	}
	name := r.PathValue("name")
	obj, err := h.svc.Field(name, q)
	switch {
	case errors.Is(err, ErrNotFound):
		httpjson.Error(w, http.StatusNotFound, httpjson.ReasonNotFound, fmt.Sprintf("fieldrequestcounts %q not found: no field rule has that name (see field-rules)", name))
	case err != nil:
		h.internalError(w, err)
	default:
		httpjson.Write(w, http.StatusOK, obj)
	}
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	serveList(h, w, r, listParams, h.svc.List)
}

// serveList answers a list request with what read returns.
func serveList[T any](h *Handler, w http.ResponseWriter, r *http.Request, params []string, read func(Query) (T, error)) {
	q, ok := h.begin(w, r, params)
	if !ok {
		return
	}
	out, err := read(q)
	if err != nil {
		h.internalError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, out)
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete && h.deleter != nil {
		h.delete(w, r)
		return
	}
	q, ok := h.begin(w, r, getParams)
	if !ok {
		return
	}
	name := r.PathValue("name")
	obj, err := h.svc.Get(name, q)
	switch {
	case errors.Is(err, ErrNotFound):
		msg := fmt.Sprintf("apirequestcounts %q not found: no deprecated requests to it were recorded", name)
		if q.Cluster != "" {
			msg = fmt.Sprintf("apirequestcounts %q not found in cluster %q: no deprecated requests to it were recorded", name, q.Cluster)
		}
		httpjson.Error(w, http.StatusNotFound, httpjson.ReasonNotFound, msg)
	case err != nil:
		h.internalError(w, err)
	default:
		httpjson.Write(w, http.StatusOK, obj)
	}
}

// begin checks method and parameters; on failure it has answered already.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request, allowed []string) (Query, bool) {
	if !readMethod(w, r, r.PathValue("name") != "" && h.deleter != nil) {
		return Query{}, false
	}
	q, err := ParseQuery(r.URL.Query(), allowed, h.maxSince)
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, httpjson.ReasonBadRequest, err.Error())
		return Query{}, false
	}
	return q, true
}

// readMethod answers anything but GET and HEAD with a 405 naming the
// methods allowed (DELETE too where deletable).
func readMethod(w http.ResponseWriter, r *http.Request, deletable bool) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	allow := "GET, HEAD"
	if deletable {
		allow += ", DELETE"
	}
	w.Header().Set("Allow", allow)
	httpjson.Error(w, http.StatusMethodNotAllowed, httpjson.ReasonMethodNotAllowed, fmt.Sprintf("%s is not allowed here; use GET", r.Method))
	return false
}

func (h *Handler) internalError(w http.ResponseWriter, err error) {
	h.log.Error().Err(err).Msg("reading counts")
	httpjson.Error(w, http.StatusInternalServerError, httpjson.ReasonInternalError, "reading counts: "+err.Error())
}

// DeleteResult answers a DELETE: what was (or, in a dry run, would be)
// removed.
type DeleteResult struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Status     string `json:"status"`
	DryRun     bool   `json:"dryRun,omitempty"`
	Details    struct {
		Name string `json:"name"`
		// Clusters and the requests removed from each.
		Clusters map[string]uint64 `json:"clusters"`
	} `json:"details"`
}

// delete resets an API's counts (all clusters, or ?cluster=), after a
// migration: the API then counts again from zero. ?dryRun=All answers the
// same and removes nothing.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	var problems []string
	for key := range v {
		if key != "cluster" && key != "dryRun" {
			problems = append(problems, fmt.Sprintf("unknown parameter %q (known: cluster, dryRun)", key))
		}
	}
	dryRun := false
	if d, ok := v["dryRun"]; ok {
		if len(d) != 1 || d[0] != "All" {
			problems = append(problems, fmt.Sprintf("dryRun %q is not valid; the only valid value is All", strings.Join(d, ",")))
		}
		dryRun = true
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		httpjson.Error(w, http.StatusBadRequest, httpjson.ReasonBadRequest, strings.Join(problems, "; "))
		return
	}
	name, cluster := r.PathValue("name"), v.Get("cluster")
	res := DeleteResult{Kind: "Status", APIVersion: "v1", Status: "Success", DryRun: dryRun}
	res.Details.Name, res.Details.Clusters = name, map[string]uint64{}
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
		httpjson.Error(w, http.StatusNotFound, httpjson.ReasonNotFound, fmt.Sprintf("apirequestcounts %q not found: nothing to delete", name))
		return
	}
	if !dryRun {
		h.log.Info().Str("api", name).Str("cluster", cluster).Interface("requests", res.Details.Clusters).Msg("counts reset")
	}
	httpjson.Write(w, http.StatusOK, res)
}
