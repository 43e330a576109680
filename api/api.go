// Package api serves Sunset's read API: APIRequestCount objects shaped like
// OpenShift's, under /apis/sunset.dev/v1.
//
//	GET /apis/sunset.dev/v1/apirequestcounts          APIRequestCountList
//	GET /apis/sunset.dev/v1/apirequestcounts/{name}   APIRequestCount
//
// Service builds the objects from counts, through the small Querier
// interface the package declares; Handler serves them over HTTP. The package
// never writes.
package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/catalog"
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
}

// Handler serves the read API.
type Handler struct {
	svc      *Service
	log      zerolog.Logger
	maxSince time.Duration
}

// New builds a Handler.
func New(opts Options) *Handler {
	return &Handler{
		svc:      NewService(opts.Querier, opts.Catalog, opts.IsSystem, opts.Now),
		log:      opts.Logger.With().Str("component", "api").Logger(),
		maxSince: opts.Retention,
	}
}

const basePath = "/apis/" + APIVersion + "/apirequestcounts"

// Register adds the API routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc(basePath, h.list)
	mux.HandleFunc(basePath+"/{name}", h.get)
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q, ok := h.begin(w, r, listParams)
	if !ok {
		return
	}
	out, err := h.svc.List(q)
	if err != nil {
		h.internalError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, out)
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
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
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		httpjson.Error(w, http.StatusMethodNotAllowed, httpjson.ReasonMethodNotAllowed, fmt.Sprintf("%s is not allowed here; use GET", r.Method))
		return Query{}, false
	}
	q, err := ParseQuery(r.URL.Query(), allowed, h.maxSince)
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, httpjson.ReasonBadRequest, err.Error())
		return Query{}, false
	}
	return q, true
}

func (h *Handler) internalError(w http.ResponseWriter, err error) {
	h.log.Error().Err(err).Msg("reading counts")
	httpjson.Error(w, http.StatusInternalServerError, httpjson.ReasonInternalError, "reading counts: "+err.Error())
}
