// Package api serves Sunset's read API: APIRequestCount objects shaped like
// OpenShift's, under /apis/sunset.dev/v1.
//
//	GET /apis/sunset.dev/v1/apirequestcounts          APIRequestCountList
//	GET /apis/sunset.dev/v1/apirequestcounts/{name}   APIRequestCount
//
// The package reads counts through the small Querier interface it declares;
// it never writes.
package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/internal/httpjson"
	"github.com/kube-sunset/sunset/store"
)

// Bounds of ?users=.
const (
	DefaultUsersToReport = 10
	MaxUsersToReport     = 100
)

// Querier reads counts. *store.Store implements it.
type Querier interface {
	APIs() []store.APIInfo
	ScanCounts(cluster, api string, from, to time.Time, fn func(store.CountKey, uint64) error) error
}

// Options configures New.
type Options struct {
	Querier Querier
	Logger  zerolog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler serves the read API.
type Handler struct {
	q   Querier
	log zerolog.Logger
	now func() time.Time
}

// New builds a Handler.
func New(opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Handler{q: opts.Querier, log: opts.Logger.With().Str("component", "api").Logger(), now: opts.Now}
}

const basePath = "/apis/" + APIVersion + "/apirequestcounts"

// Register adds the API routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc(basePath, h.list)
	mux.HandleFunc(basePath+"/{name}", h.get)
}

// query holds validated query parameters.
type query struct {
	users   int
	cluster string
}

var allowedParams = []string{"cluster", "users"}

func parseQuery(v url.Values) (query, error) {
	q := query{users: DefaultUsersToReport}
	var problems []string
	for key := range v {
		if !slices.Contains(allowedParams, key) {
			problems = append(problems, fmt.Sprintf("unknown parameter %q (known: %s)", key, strings.Join(allowedParams, ", ")))
		}
	}
	if s := v.Get("users"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxUsersToReport {
			problems = append(problems, fmt.Sprintf("users must be a whole number from 1 to %d", MaxUsersToReport))
		}
		q.users = n
	}
	q.cluster = v.Get("cluster")
	if len(problems) > 0 {
		slices.Sort(problems)
		return q, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return q, nil
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q, ok := h.begin(w, r)
	if !ok {
		return
	}
	now := h.now()
	out := APIRequestCountList{APIVersion: APIVersion, Kind: "APIRequestCountList", Items: []APIRequestCount{}}
	infos := h.q.APIs()
	for start := 0; start < len(infos); {
		end := start + 1
		for end < len(infos) && infos[end].API == infos[start].API {
			end++
		}
		obj, found, err := h.build(infos[start].API, infos[start:end], q, now)
		if err != nil {
			h.internalError(w, err)
			return
		}
		if found {
			out.Items = append(out.Items, obj)
		}
		start = end
	}
	httpjson.Write(w, http.StatusOK, out)
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	q, ok := h.begin(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	var infos []store.APIInfo
	for _, info := range h.q.APIs() {
		if info.API == name {
			infos = append(infos, info)
		}
	}
	obj, found, err := h.build(name, infos, q, h.now())
	if err != nil {
		h.internalError(w, err)
		return
	}
	if !found {
		msg := fmt.Sprintf("apirequestcounts %q not found: no deprecated requests to it were recorded", name)
		if q.cluster != "" {
			msg = fmt.Sprintf("apirequestcounts %q not found in cluster %q: no deprecated requests to it were recorded", name, q.cluster)
		}
		httpjson.Error(w, http.StatusNotFound, httpjson.ReasonNotFound, msg)
		return
	}
	httpjson.Write(w, http.StatusOK, obj)
}

// begin checks method and parameters; on failure it has answered already.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request) (query, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		httpjson.Error(w, http.StatusMethodNotAllowed, httpjson.ReasonMethodNotAllowed, fmt.Sprintf("%s is not allowed here; use GET", r.Method))
		return query{}, false
	}
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, httpjson.ReasonBadRequest, err.Error())
		return query{}, false
	}
	return q, true
}

func (h *Handler) internalError(w http.ResponseWriter, err error) {
	h.log.Error().Err(err).Msg("reading counts")
	httpjson.Error(w, http.StatusInternalServerError, httpjson.ReasonInternalError, "reading counts: "+err.Error())
}

// build renders one API from the clusters in infos that match q.
func (h *Handler) build(name string, infos []store.APIInfo, q query, now time.Time) (APIRequestCount, bool, error) {
	b := newBuilder(now)
	from, to := b.window()
	removedIn := ""
	found := false
	for _, info := range infos {
		if q.cluster != "" && info.Cluster != q.cluster {
			continue
		}
		found = true
		if info.RemovedRelease != "" && (removedIn == "" || versionLess(info.RemovedRelease, removedIn)) {
			removedIn = info.RemovedRelease
		}
		if err := h.q.ScanCounts(info.Cluster, info.API, from, to, b.add); err != nil {
			return APIRequestCount{}, false, err
		}
	}
	obj := APIRequestCount{
		APIVersion: APIVersion,
		Kind:       "APIRequestCount",
		Metadata:   ObjectMeta{Name: name},
		Spec:       APIRequestCountSpec{NumberOfUsersToReport: int64(q.users)},
		Status:     b.status(removedIn, q.users),
	}
	return obj, found, nil
}

// versionLess compares "major.minor" releases numerically, so "1.9" sorts
// before "1.10"; anything unparsable sorts as a string.
func versionLess(a, b string) bool {
	am, an, aok := splitRelease(a)
	bm, bn, bok := splitRelease(b)
	if !aok || !bok {
		return a < b
	}
	if am != bm {
		return am < bm
	}
	return an < bn
}

func splitRelease(s string) (major, minor int, ok bool) {
	ma, mi, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(ma)
	minor, err2 = strconv.Atoi(mi)
	return major, minor, err1 == nil && err2 == nil
}
