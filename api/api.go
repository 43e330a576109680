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

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/internal/httpjson"
	"github.com/kube-sunset/sunset/store"
)

// Bounds of ?users=.
const (
	DefaultUsersToReport = 10
	MaxUsersToReport     = 100
)

// List filters of GET .../apirequestcounts, beside cluster and users.
const (
	StateDeprecated = "deprecated"
	StateRemoved    = "removed"
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
	// Catalog supplies replacement, warning and removed release; nil means
	// the built-in catalog.
	Catalog *catalog.Catalog
	// IsSystem classifies usernames as system traffic; nil means none is.
	IsSystem func(username string) bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler serves the read API.
type Handler struct {
	q        Querier
	log      zerolog.Logger
	catalog  *catalog.Catalog
	isSystem func(string) bool
	now      func() time.Time
}

// New builds a Handler.
func New(opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Catalog == nil {
		opts.Catalog, _ = catalog.New(nil)
	}
	if opts.IsSystem == nil {
		opts.IsSystem = func(string) bool { return false }
	}
	return &Handler{q: opts.Querier, log: opts.Logger.With().Str("component", "api").Logger(),
		catalog: opts.Catalog, isSystem: opts.IsSystem, now: opts.Now}
}

const basePath = "/apis/" + APIVersion + "/apirequestcounts"

// Register adds the API routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc(basePath, h.list)
	mux.HandleFunc(basePath+"/{name}", h.get)
}

// query holds validated query parameters.
type query struct {
	users         int
	cluster       string
	removedIn     catalog.Release
	removedBefore catalog.Release
	state         string
}

var (
	getParams  = []string{"cluster", "users"}
	listParams = []string{"cluster", "removedBefore", "removedRelease", "state", "users"}
)

func parseQuery(v url.Values, allowed []string) (query, error) {
	q := query{users: DefaultUsersToReport}
	var problems []string
	for key := range v {
		if !slices.Contains(allowed, key) {
			problems = append(problems, fmt.Sprintf("unknown parameter %q (known: %s)", key, strings.Join(allowed, ", ")))
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
	for key, dst := range map[string]*catalog.Release{"removedRelease": &q.removedIn, "removedBefore": &q.removedBefore} {
		if s := v.Get(key); s != "" {
			r, err := catalog.ParseRelease(s)
			if err != nil {
				problems = append(problems, key+": "+err.Error())
			}
			*dst = r
		}
	}
	switch q.state = v.Get("state"); q.state {
	case "", StateDeprecated, StateRemoved:
	default:
		problems = append(problems, fmt.Sprintf("state %q is not valid; use %s or %s", q.state, StateDeprecated, StateRemoved))
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return q, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return q, nil
}

// matches applies the list filters to a built object.
func (q query) matches(obj APIRequestCount) bool {
	st := obj.Status
	removedIn, _ := catalog.ParseRelease(st.RemovedInRelease)
	switch {
	case !q.removedIn.IsZero() && removedIn != q.removedIn:
		return false
	case !q.removedBefore.IsZero() && (removedIn.IsZero() || !removedIn.Less(q.removedBefore)):
		return false
	case q.state == StateRemoved && st.RemovedRequestCount == 0:
		return false
	case q.state == StateDeprecated && st.RequestCount-st.RemovedRequestCount == 0:
		return false
	}
	return true
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q, ok := h.begin(w, r, listParams)
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
		if found && q.matches(obj) {
			out.Items = append(out.Items, obj)
		}
		start = end
	}
	httpjson.Write(w, http.StatusOK, out)
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	q, ok := h.begin(w, r, getParams)
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
func (h *Handler) begin(w http.ResponseWriter, r *http.Request, allowed []string) (query, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		httpjson.Error(w, http.StatusMethodNotAllowed, httpjson.ReasonMethodNotAllowed, fmt.Sprintf("%s is not allowed here; use GET", r.Method))
		return query{}, false
	}
	q, err := parseQuery(r.URL.Query(), allowed)
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
	b := newBuilder(now, h.isSystem)
	from, to := b.window()
	var removedIn catalog.Release
	found := false
	for _, info := range infos {
		if q.cluster != "" && info.Cluster != q.cluster {
			continue
		}
		found = true
		// Clusters may announce different releases; the earliest matters.
		if r, err := catalog.ParseRelease(info.RemovedRelease); err == nil && (removedIn.IsZero() || r.Less(removedIn)) {
			removedIn = r
		}
		if err := h.q.ScanCounts(info.Cluster, info.API, from, to, b.add); err != nil {
			return APIRequestCount{}, false, err
		}
	}
	st := b.status(removedIn.String(), q.users)
	if entry, ok := h.lookup(name); ok {
		if st.RemovedInRelease == "" {
			st.RemovedInRelease = entry.RemovedIn
		}
		st.DeprecatedInRelease = entry.DeprecatedIn
		st.Warning = entry.Warning()
		if r := entry.Replacement; r != nil {
			st.Replacement = &Replacement{Group: r.Group, Version: r.Version, Kind: r.Kind, Resource: r.Resource}
		}
	}
	obj := APIRequestCount{
		APIVersion: APIVersion,
		Kind:       "APIRequestCount",
		Metadata:   ObjectMeta{Name: name},
		Spec:       APIRequestCountSpec{NumberOfUsersToReport: int64(q.users)},
		Status:     st,
	}
	return obj, found, nil
}

// lookup finds the catalog entry of an API name, resource.version.group.
func (h *Handler) lookup(name string) (catalog.Entry, bool) {
	parts := strings.SplitN(name, ".", 3)
	if len(parts) < 2 {
		return catalog.Entry{}, false
	}
	group := ""
	if len(parts) == 3 {
		group = parts[2]
	}
	return h.catalog.Lookup(group, parts[1], parts[0])
}
