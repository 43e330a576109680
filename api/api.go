// Package api serves Sunset's read API: APIRequestCount objects shaped like
// OpenShift's, under /apis/sunset.dev/v1, as a Kubernetes API that
// kube-apiserver can aggregate.
//
//	GET    /apis, /apis/sunset.dev, /apis/sunset.dev/v1  discovery
//	GET    /apis/sunset.dev/v1/apirequestcounts          APIRequestCountList
//	GET    /apis/sunset.dev/v1/apirequestcounts/{name}   APIRequestCount
//	DELETE /apis/sunset.dev/v1/apirequestcounts/{name}   reset an API's counts
//	GET    /apis/sunset.dev/v1/fieldrequestcounts        FieldRequestCountList
//	GET    /apis/sunset.dev/v1/fieldrequestcounts/{name} FieldRequestCount
//	GET    /apis/sunset.dev/v1/webhookcounts             WebhookCountList
//	GET    /apis/sunset.dev/v1/webhookcounts/{name}      WebhookCount
//	GET    /apis/sunset.dev/v1/upgradechecks             UpgradeCheckList
//	GET    /apis/sunset.dev/v1/upgradechecks/{release}   UpgradeCheck
//	GET    /apis/sunset.dev/v1/serverinfo                ServerInfo
//
// Every GET also answers as a meta.k8s.io/v1 Table when asked, as `kubectl
// get` does, and lists take labelSelector and fieldSelector. Errors are
// metav1 Status objects from k8s.io/apimachinery's api/errors.
//
// The objects' types are package api/v1's (sunsetv1), which the client
// and the CLI import without this server. Service builds the objects from
// counts, through the small Querier interface the package declares;
// Handler serves them over HTTP. The only write is the reset, through the
// Deleter interface. Who may call what is decided in front of the Handler
// (package access). The upgradechecks' verdict is package verdict's, which
// `sunset check` calls too, so that the two give one answer.
package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
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
	// Webhooks serves admission webhook counts; nil leaves them out.
	Webhooks *WebhookService
	// ClusterScan, if set, joins the upgrade checks.
	ClusterScan ClusterScan
	// Exemptions, if set, apply to the upgrade checks.
	Exemptions Exemptions
	// GateOverrides, if set, are shown in the upgrade checks.
	GateOverrides GateOverrideReader
	// Views, if set, keep what queries read for the next ones.
	Views *Views
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
	webhooks *WebhookService
}

// New builds a Handler.
func New(opts Options) *Handler {
	svc := NewService(opts.Querier, opts.Catalog, opts.FieldRules, opts.IsSystem, opts.Now)
	if opts.ClusterScan != nil {
		svc.WithClusterScan(opts.ClusterScan)
	}
	if opts.Exemptions != nil {
		svc.WithExemptions(opts.Exemptions)
	}
	if opts.GateOverrides != nil {
		svc.WithGateOverrides(opts.GateOverrides)
	}
	svc.WithViews(opts.Views)
	return &Handler{
		svc:      svc,
		log:      opts.Logger.With().Str("component", "api").Logger(),
		maxSince: opts.Retention,
		deleter:  opts.Deleter,
		webhooks: opts.Webhooks,
	}
}

const (
	basePath   = "/apis/" + sunsetv1.APIVersion + "/" + "apirequestcounts"
	fieldsPath = "/apis/" + sunsetv1.APIVersion + "/" + "fieldrequestcounts"
)

// Register adds discovery and the API routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	registerDiscovery(mux)
	mux.HandleFunc(basePath, h.list)
	mux.HandleFunc(basePath+"/{name}", h.get)
	mux.HandleFunc(fieldsPath, h.listFields)
	mux.HandleFunc(fieldsPath+"/{name}", h.getField)
	if h.webhooks != nil {
		wh := webhookHandler{h: h, svc: h.webhooks}
		mux.HandleFunc(webhooksPath, wh.list)
		mux.HandleFunc(webhooksPath+"/{name}", wh.get)
	}
	mux.HandleFunc(checksPath, h.listChecks)
	mux.HandleFunc(checksPath+"/{name}", h.getCheck)
	mux.HandleFunc(infoPath, h.serveInfo)
}

// Parameters every Kubernetes client may send, which the API accepts and,
// apart from those named, ignores: lists are small and always whole, so
// limit and continue have nothing to page, and there is one version of
// everything.
var (
	kubeGetParams  = []string{"resourceVersion", "includeObject", "pretty"}
	kubeListParams = append([]string{"labelSelector", "fieldSelector", "limit", "continue", "resourceVersionMatch", "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents", "watch"}, kubeGetParams...)
	// kubePagingParams are what kubectl and client-go send to any list
	// (kubectl get sends limit=500), for the resources that have no
	// selectors and no watch: webhookcounts and upgradechecks.
	kubePagingParams = append([]string{"limit", "continue", "resourceVersionMatch", "timeoutSeconds"}, kubeGetParams...)
)

func (h *Handler) listFields(w http.ResponseWriter, r *http.Request) {
	serveList(h, w, r, FieldRequestCountsResource.GroupResource(), getParams, h.svc.Fields,
		func(l sunsetv1.FieldRequestCountList) []sunsetv1.FieldRequestCount { return l.Items },
		func(l *sunsetv1.FieldRequestCountList, items []sunsetv1.FieldRequestCount) { l.Items = items },
		func(o sunsetv1.FieldRequestCount) (metav1.ObjectMeta, sunsetv1.APIRequestCountStatus) {
			return o.Metadata, o.Status
		}, nil)
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	var outs map[string]*output
	read := func(q sunsetv1.Query) (sunsetv1.APIRequestCountList, error) {
		list, err := h.svc.list(q)
		outs = make(map[string]*output, len(list))
		l := sunsetv1.APIRequestCountList{TypeMeta: typeMeta("APIRequestCountList"), Items: make([]sunsetv1.APIRequestCount, len(list))}
		for i, o := range list {
			l.Items[i] = o.obj
			outs[o.obj.Metadata.Name] = o
		}
		return l, err
	}
	serveList(h, w, r, APIRequestCountsResource.GroupResource(), listParams, read,
		func(l sunsetv1.APIRequestCountList) []sunsetv1.APIRequestCount { return l.Items },
		func(l *sunsetv1.APIRequestCountList, items []sunsetv1.APIRequestCount) { l.Items = items },
		func(o sunsetv1.APIRequestCount) (metav1.ObjectMeta, sunsetv1.APIRequestCountStatus) {
			return o.Metadata, o.Status
		}, func(items []sunsetv1.APIRequestCount) [][]byte {
			kept := make([]*output, len(items))
			for i, it := range items {
				kept[i] = outs[it.Metadata.Name]
			}
			return listJSON(kept)
		})
}

// serveList answers a list request with what read returns, filtered by the
// label and field selectors, as JSON or as a Table. keptJSON, if set,
// returns the compact JSON, in pieces, of a list of items that views kept
// encoded, or nil.
func serveList[L, T any](h *Handler, w http.ResponseWriter, r *http.Request, gr schema.GroupResource, params []string,
	read func(sunsetv1.Query) (L, error), items func(L) []T, setItems func(*L, []T), parts func(T) (metav1.ObjectMeta, sunsetv1.APIRequestCountStatus),
	keptJSON func([]T) [][]byte) {
	q, ok := h.begin(w, r, gr, params, kubeListParams)
	if !ok {
		return
	}
	v := r.URL.Query()
	if v.Get("watch") == "true" || v.Get("watch") == "1" {
		httpjson.WriteStatus(w, apierrors.NewMethodNotSupported(gr, "watch"))
		return
	}
	sel, err := parseSelectors(v)
	if err != nil {
		httpjson.WriteStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	out, err := read(q)
	if err != nil {
		h.internalError(w, err)
		return
	}
	kept := slices.DeleteFunc(items(out), func(it T) bool {
		meta, _ := parts(it)
		return !sel.matches(meta)
	})
	setItems(&out, kept)
	var encoded func() [][]byte
	if keptJSON != nil {
		encoded = func() [][]byte { return keptJSON(kept) }
	}
	h.writeEncoded(w, r, out, encoded, func(include string) (*metav1.Table, error) {
		t := newTable()
		for _, it := range kept {
			meta, st := parts(it)
			row, err := tableRow(meta, st, it, include)
			if err != nil {
				return nil, err
			}
			t.Rows = append(t.Rows, row)
		}
		return t, nil
	})
}

// singleTable is the Table of one object.
func singleTable(meta metav1.ObjectMeta, st sunsetv1.APIRequestCountStatus, obj any) func(include string) (*metav1.Table, error) {
	return func(include string) (*metav1.Table, error) {
		t := newTable()
		row, err := tableRow(meta, st, obj, include)
		t.Rows = append(t.Rows, row)
		return t, err
	}
}

// write answers with obj as JSON, or with the Table toTable builds when the
// client asks for one.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, obj any, toTable func(include string) (*metav1.Table, error)) {
	h.writeEncoded(w, r, obj, nil, toTable)
}

// writeEncoded is write with, if encoded is set, obj's compact JSON in
// pieces as views kept it, or nil if they did not.
func (h *Handler) writeEncoded(w http.ResponseWriter, r *http.Request, obj any, encoded func() [][]byte, toTable func(include string) (*metav1.Table, error)) {
	table, err := wantsTable(r)
	if err != nil {
		httpjson.WriteStatus(w, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, r.Method, schema.GroupResource{}, "", err.Error(), 0, false))
		return
	}
	if !table {
		if encoded != nil && !httpjson.Pretty(r) {
			if b := encoded(); b != nil {
				httpjson.WriteEncoded(w, http.StatusOK, b)
				return
			}
		}
		httpjson.WriteFor(w, r, http.StatusOK, obj)
		return
	}
	include, err := includeObject(r)
	if err != nil {
		httpjson.WriteStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	t, err := toTable(include)
	if err != nil {
		h.internalError(w, err)
		return
	}
	httpjson.WriteFor(w, r, http.StatusOK, t)
}

func (h *Handler) getField(w http.ResponseWriter, r *http.Request) {
	gr := FieldRequestCountsResource.GroupResource()
	q, ok := h.begin(w, r, gr, getParams, kubeGetParams)
	if !ok {
		return
	}
	name := r.PathValue("name")
	obj, err := h.svc.Field(name, q)
	switch {
	case errors.Is(err, sunsetv1.ErrNotFound):
		httpjson.WriteStatus(w, notFound(gr, name, "no field rule has that name (see field-rules)"))
	case err != nil:
		h.internalError(w, err)
	default:
		h.write(w, r, obj, singleTable(obj.Metadata, obj.Status, obj))
	}
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	gr := APIRequestCountsResource.GroupResource()
	if r.Method == http.MethodDelete && h.deleter != nil {
		h.delete(w, r)
		return
	}
	q, ok := h.begin(w, r, gr, getParams, kubeGetParams)
	if !ok {
		return
	}
	name := r.PathValue("name")
	out, err := h.svc.get(name, q)
	switch {
	case errors.Is(err, sunsetv1.ErrNotFound):
		why := "no deprecated requests to it were recorded"
		if q.Cluster != "" {
			why = fmt.Sprintf("no deprecated requests to it were recorded in cluster %q", q.Cluster)
		}
		httpjson.WriteStatus(w, notFound(gr, name, why))
	case err != nil:
		h.internalError(w, err)
	default:
		h.writeEncoded(w, r, out.obj, func() [][]byte {
			if out.json == nil {
				return nil
			}
			return [][]byte{out.json}
		}, singleTable(out.obj.Metadata, out.obj.Status, out.obj))
	}
}

// notFound is apimachinery's NotFound with the reason appended, so the
// user learns why as well as what.
func notFound(gr schema.GroupResource, name, why string) *apierrors.StatusError {
	err := apierrors.NewNotFound(gr, name)
	err.ErrStatus.Message += ": " + why
	return err
}

// begin checks method and parameters: Sunset's own (allowed) and the
// standard Kubernetes ones (kube); on failure it has answered already.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request, gr schema.GroupResource, allowed, kube []string) (sunsetv1.Query, bool) {
	if !h.methodAllowed(w, r) {
		return sunsetv1.Query{}, false
	}
	q, err := ParseQuery(withoutKube(r.URL.Query(), kube), allowed, h.maxSince)
	if err != nil {
		httpjson.WriteStatus(w, apierrors.NewBadRequest(err.Error()))
		return sunsetv1.Query{}, false
	}
	return q, true
}

// withoutKube is v without the Kubernetes clients' parameters in kube,
// which the API accepts and then ignores or handles apart: the errors
// about the rest name only the API's own.
func withoutKube(v url.Values, kube []string) url.Values {
	ours := url.Values{}
	for key, vals := range v {
		if !slices.Contains(kube, key) {
			ours[key] = vals
		}
	}
	return ours
}

// methodAllowed answers 405 to anything but GET and HEAD, and DELETE where
// counts can be reset.
func (h *Handler) methodAllowed(w http.ResponseWriter, r *http.Request) bool {
	return readMethod(w, r, r.PathValue("name") != "" && h.deleter != nil && strings.HasPrefix(r.URL.Path, basePath+"/"))
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
	resource, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/apis/"+sunsetv1.APIVersion+"/"), "/")
	httpjson.WriteStatus(w, apierrors.NewMethodNotSupported(GroupVersion.WithResource(resource).GroupResource(), r.Method))
	return false
}

func (h *Handler) internalError(w http.ResponseWriter, err error) {
	h.log.Error().Err(err).Msg("reading counts")
	httpjson.WriteStatus(w, apierrors.NewInternalError(fmt.Errorf("reading counts: %w", err)))
}
