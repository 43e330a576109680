package api

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	builder2 "k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	generatedopenapi "github.com/kube-sunset/sunset/api/generated/openapi"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/httpjson"
)

// OpenAPI: /openapi/v2 and /openapi/v3, built as k8s.io/apiserver's
// generic API server builds them, from route descriptions and the
// definitions hack/openapi-gen generates from the Go types (package
// api/generated/openapi). kube-apiserver's aggregator downloads both
// and merges them into its own, which is where `kubectl explain` reads
// them: it finds a kind's schema by the x-kubernetes-group-version-kind
// extension of its definition.

// OpenAPI paths.
const (
	openAPIV2Path = "/openapi/v2"
	openAPIV3Path = "/openapi/v3"
	// openAPIV3GroupVersion is sunset.dev/v1's document under
	// openAPIV3Path, as /openapi/v3 lists it.
	openAPIV3GroupVersion = "apis/" + sunsetv1.APIVersion
)

// servedObjects are the objects of sunset.dev/v1: their definitions carry
// their group, version and kind.
var servedObjects = []any{
	sunsetv1.APIRequestCount{}, sunsetv1.APIRequestCountList{},
	sunsetv1.FieldRequestCount{}, sunsetv1.FieldRequestCountList{},
	sunsetv1.WebhookCount{}, sunsetv1.WebhookCountList{},
	sunsetv1.UpgradeCheck{}, sunsetv1.UpgradeCheckList{},
	sunsetv1.ServerInfo{},
}

// Route metadata the generic API server gives its operations, which
// clients generated from the spec read.
const (
	extensionAction = "x-kubernetes-action"
	extensionGVK    = "x-kubernetes-group-version-kind"
)

// openAPIRoute is one operation of sunset.dev/v1, as kube-openapi's
// builders read it. The HTTP handlers are Handler's; a test holds the two
// to each other.
type openAPIRoute struct {
	method, path, operation, doc string
	// action is the Kubernetes verb kind: list, get or delete.
	action string
	kind   string
	params []common.Parameter
	// body is the request body's type; nil for none.
	body any
	// response is the type of a 200 answer.
	response any
}

func (r openAPIRoute) Method() string                 { return r.method }
func (r openAPIRoute) Path() string                   { return r.path }
func (r openAPIRoute) OperationName() string          { return r.operation }
func (r openAPIRoute) Parameters() []common.Parameter { return r.params }
func (r openAPIRoute) Description() string            { return r.doc }
func (r openAPIRoute) Produces() []string             { return []string{runtime.ContentTypeJSON} }
func (r openAPIRoute) RequestPayloadSample() any      { return modelOf(r.body) }
func (r openAPIRoute) ResponsePayloadSample() any     { return modelOf(r.response) }

func (r openAPIRoute) Consumes() []string {
	if r.body == nil {
		return nil
	}
	return []string{runtime.ContentTypeJSON}
}

func (r openAPIRoute) Metadata() map[string]any {
	return map[string]any{
		extensionAction: r.action,
		extensionGVK:    metav1.GroupVersionKind{Group: sunsetv1.Group, Version: sunsetv1.Version, Kind: r.kind},
	}
}

func (r openAPIRoute) StatusCodeResponses() []common.StatusCodeResponse {
	return []common.StatusCodeResponse{openAPIResponse{code: http.StatusOK, message: "OK", model: modelOf(r.response)}}
}

// model stands for a Go type where kube-openapi's builders ask for the
// name of its definition.
type model struct{ name string }

func (m model) OpenAPIModelName() string { return m.name }

// modelOf is v's type as a model; nil stays nil.
func modelOf(v any) any {
	if v == nil {
		return nil
	}
	return model{definitionKey(reflect.TypeOf(v))}
}

// definitionKey is the key of t's definition in
// generatedopenapi.GetOpenAPIDefinitions: the model name of a type that
// declares one (meta/v1's), else its package path and name. It does not
// ask util.GetCanonicalTypeName, which takes the OpenAPIModelName method
// that every Sunset object inherits from its embedded metav1.TypeMeta, and
// would name them all TypeMeta.
func definitionKey(t reflect.Type) string {
	if namer, ok := reflect.New(t).Elem().Interface().(util.OpenAPIModelNamer); ok {
		if name := namer.OpenAPIModelName(); strings.HasSuffix(name, "."+t.Name()) {
			return name
		}
	}
	return t.PkgPath() + "." + t.Name()
}

// openAPIResponse is a route's answer.
type openAPIResponse struct {
	code    int
	message string
	model   any
}

func (r openAPIResponse) Code() int       { return r.code }
func (r openAPIResponse) Message() string { return r.message }
func (r openAPIResponse) Model() any      { return r.model }

// openAPIParam is a parameter of a route.
type openAPIParam struct {
	name, description, dataType string
	kind                        common.ParameterKind
	required                    bool
}

func (p openAPIParam) Name() string               { return p.name }
func (p openAPIParam) Description() string        { return p.description }
func (p openAPIParam) Required() bool             { return p.required }
func (p openAPIParam) Kind() common.ParameterKind { return p.kind }
func (p openAPIParam) DataType() string           { return p.dataType }
func (p openAPIParam) AllowMultiple() bool        { return false }

// queryParamDocs describes every query parameter the routes take: Sunset's
// own (see ParseQuery, ParseWebhookQuery and upgradecheck.go) and the
// standard Kubernetes ones that lists and gets accept.
var queryParamDocs = map[string]struct{ dataType, doc string }{
	"users":                {"integer", "Users reported per node and hour, 1 to 100, top first; 0 means the default, 10."},
	"cluster":              {"string", "Only this cluster's apiservers; all clusters when empty."},
	"removedRelease":       {"string", "Only APIs removed in this release, e.g. 1.37."},
	"removedBefore":        {"string", "Only APIs removed before this release, e.g. 1.38."},
	"state":                {"string", "deprecated: APIs with deprecated requests in the last 24 h; removed: APIs called after their removal in the last 24 h."},
	"user":                 {"string", "Only APIs this username called in the window (the last 24 h without since)."},
	"since":                {"string", "A window of whole hours before now, from 1h up to the retention, e.g. 168h: adds status.window (for upgrade checks, the window checked; default 24h)."},
	"hourly":               {"boolean", "With since: adds status.window.byHour, the window's hours with requests."},
	"class":                {"string", "Only resources of this class: critical, security or virtual."},
	"excludeSystem":        {"boolean", "Leave system identities' requests out of the verdict; default true."},
	"warningsAsErrors":     {"boolean", "Deprecated APIs that are still served fail the check too."},
	"cleanFor":             {"string", "Whole hours, e.g. 6h: a caller whose last hour with requests ended at least this long ago is treated as stopped and no longer fails the check."},
	"from":                 {"string", "The release upgraded from, e.g. 1.34: status.steps names each release after it, up to the target, at which something requested breaks."},
	"dryRun":               {"string", "All: answer what would be removed, and remove nothing."},
	"pretty":               {"string", "If 'true', then the output is pretty printed."},
	"includeObject":        {"string", "With a Table: None, Metadata (the default) or Object, what each row holds of its object."},
	"labelSelector":        {"string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."},
	"fieldSelector":        {"string", "A selector to restrict the list of returned objects by their fields: metadata.name only. Defaults to everything."},
	"limit":                {"integer", "Accepted and ignored: lists are always whole."},
	"continue":             {"string", "Accepted and ignored: lists are always whole."},
	"resourceVersion":      {"string", "Accepted and ignored: there is one version of everything."},
	"resourceVersionMatch": {"string", "Accepted and ignored: there is one version of everything."},
	"timeoutSeconds":       {"integer", "Accepted and ignored."},
	"allowWatchBookmarks":  {"boolean", "Accepted and ignored: there is no watch."},
	"sendInitialEvents":    {"boolean", "Accepted and ignored: there is no watch."},
	"watch":                {"boolean", "Not supported: true is answered 405."},
}

// queryParams describes names as query parameters.
func queryParams(names ...[]string) ([]common.Parameter, error) {
	var out []common.Parameter
	seen := map[string]bool{}
	for _, list := range names {
		for _, name := range list {
			d, ok := queryParamDocs[name]
			if !ok {
				return nil, fmt.Errorf("query parameter %q has no description in queryParamDocs (api/openapi.go)", name)
			}
			if !seen[name] {
				seen[name] = true
				out = append(out, openAPIParam{name: name, description: d.doc, dataType: d.dataType, kind: common.QueryParameterKind})
			}
		}
	}
	return out, nil
}

// nameParam is the {name} of an object's path.
func nameParam(doc string) common.Parameter {
	return openAPIParam{name: "name", description: doc, dataType: "string", kind: common.PathParameterKind, required: true}
}

// openAPIRoutes are the routes Handler.Register serves under
// /apis/sunset.dev/v1, described.
type openAPIRoutes []common.Route

func (openAPIRoutes) RootPath() string                   { return "/apis/" + sunsetv1.APIVersion }
func (openAPIRoutes) PathParameters() []common.Parameter { return nil }
func (r openAPIRoutes) Routes() []common.Route           { return r }

// sunsetRoutes describes every route of sunset.dev/v1.
func sunsetRoutes() (openAPIRoutes, error) {
	root := "/apis/" + sunsetv1.APIVersion
	var routes openAPIRoutes
	var problems []error
	add := func(route openAPIRoute, params ...[]string) {
		q, err := queryParams(params...)
		if err != nil {
			problems = append(problems, err)
		}
		route.params = append(route.params, q...)
		routes = append(routes, route)
	}
	type resource struct {
		name, kind, nameDoc string
		list, object        any
		listParams          [][]string
		getParams           [][]string
	}
	for _, res := range []resource{
		{APIRequestCountsResource.Resource, "APIRequestCount", "The API: resource.version.group, e.g. cronjobs.v1beta1.batch or endpoints.v1.",
			sunsetv1.APIRequestCountList{}, sunsetv1.APIRequestCount{}, [][]string{listParams, kubeListParams}, [][]string{getParams, kubeGetParams}},
		{FieldRequestCountsResource.Resource, "FieldRequestCount", "The field rule's name, e.g. kube-proxy-version.",
			sunsetv1.FieldRequestCountList{}, sunsetv1.FieldRequestCount{}, [][]string{getParams, kubeListParams}, [][]string{getParams, kubeGetParams}},
		{WebhookCountsResource.Resource, "WebhookCount", "The webhook: configuration.webhook.",
			sunsetv1.WebhookCountList{}, sunsetv1.WebhookCount{}, [][]string{webhookParams, kubePagingParams}, [][]string{webhookParams, kubePagingParams}},
		{UpgradeChecksResource.Resource, "UpgradeCheck", "The target release, e.g. 1.37.",
			sunsetv1.UpgradeCheckList{}, sunsetv1.UpgradeCheck{}, [][]string{checkParams, kubePagingParams}, [][]string{checkParams, kubePagingParams}},
	} {
		kindID := apiopenapi.ToValidOperationID(res.kind, true)
		add(openAPIRoute{method: http.MethodGet, path: root + "/" + res.name, action: "list", kind: res.kind,
			operation: "listSunsetDevV1" + kindID, doc: "list objects of kind " + res.kind, response: res.list}, res.listParams...)
		add(openAPIRoute{method: http.MethodGet, path: root + "/" + res.name + "/{name}", action: "get", kind: res.kind,
			operation: "readSunsetDevV1" + kindID, doc: "read the specified " + res.kind, response: res.object,
			params: []common.Parameter{nameParam(res.nameDoc)}}, res.getParams...)
	}
	add(openAPIRoute{method: http.MethodDelete, path: root + "/" + APIRequestCountsResource.Resource + "/{name}", action: "delete", kind: "APIRequestCount",
		operation: "deleteSunsetDevV1APIRequestCount", doc: "reset the counts of an API, in every cluster or in one",
		body: metav1.DeleteOptions{}, response: metav1.Status{},
		params: []common.Parameter{nameParam("The API: resource.version.group."),
			openAPIParam{name: "body", description: "Optional: dryRun: [All], as kubectl delete --dry-run=server sends it.", kind: common.BodyParameterKind}}},
		[]string{"cluster", "dryRun", "pretty"})
	add(openAPIRoute{method: http.MethodGet, path: infoPath, action: "get", kind: "ServerInfo",
		operation: "readSunsetDevV1ServerInfo", doc: "read the server's clock, retention and clusters", response: sunsetv1.ServerInfo{}},
		infoParams)
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	return routes, nil
}

// definitionNamer names definitions as kube-apiserver does: reverse
// domain names (com.github.kube-sunset.sunset.api.v1.APIRequestCount,
// io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta), and tags each kind
// with its group, version and kind.
type definitionNamer struct {
	meta  *apiopenapi.DefinitionNamer
	kinds map[string]string
}

func newDefinitionNamer() definitionNamer {
	// The meta types sunset.dev/v1 takes and answers with (DeleteOptions,
	// Status), registered as a generic API server registers them.
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, GroupVersion)
	n := definitionNamer{meta: apiopenapi.NewDefinitionNamer(scheme), kinds: map[string]string{}}
	for _, obj := range servedObjects {
		n.kinds[friendlyName(definitionKey(reflect.TypeOf(obj)))] = reflect.TypeOf(obj).Name()
	}
	return n
}

// friendlyName is a Go type's definition name; names generated from
// OpenAPIModelName methods already are.
func friendlyName(name string) string {
	if !strings.Contains(name, "/") {
		return name
	}
	return util.ToRESTFriendlyName(name)
}

func (n definitionNamer) name(goName string) (string, spec.Extensions) {
	name := friendlyName(goName)
	if kind, ok := n.kinds[name]; ok {
		return name, spec.Extensions{extensionGVK: []any{map[string]any{"group": sunsetv1.Group, "version": sunsetv1.Version, "kind": kind}}}
	}
	return n.meta.GetDefinitionName(name)
}

// operationIDAndTags gives each operation its ID and the tag the generic
// API server gives operations of sunset.dev/v1.
func operationIDAndTags(r common.Route) (string, []string, error) {
	return r.OperationName(), []string{"sunsetDev_v1"}, nil
}

// buildOpenAPI builds the OpenAPI v2 document of the whole server and the
// v3 document of sunset.dev/v1.
func buildOpenAPI() (*spec.Swagger, *handler3.OpenAPIService, error) {
	routes, err := sunsetRoutes()
	if err != nil {
		return nil, nil, err
	}
	namer := newDefinitionNamer()
	info := &spec.Info{InfoProps: spec.InfoProps{Title: "Sunset", Version: sunsetv1.Version}}
	v2, err := builder2.BuildOpenAPISpecFromRoutes([]common.RouteContainer{routes}, &common.Config{
		Info:                           info,
		GetDefinitions:                 generatedopenapi.GetOpenAPIDefinitions,
		GetDefinitionName:              namer.name,
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("building /openapi/v2 (after a change to the API's types, run make generate): %w", err)
	}
	v2.Definitions = handler.PruneDefaults(v2.Definitions)
	v3, err := builder3.BuildOpenAPISpecFromRoutes([]common.RouteContainer{routes}, &common.OpenAPIV3Config{
		Info:                           info,
		GetDefinitions:                 generatedopenapi.GetOpenAPIDefinitions,
		GetDefinitionName:              namer.name,
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("building /openapi/v3 (after a change to the API's types, run make generate): %w", err)
	}
	groups := handler3.NewOpenAPIService()
	groups.UpdateGroupVersion(openAPIV3GroupVersion, v3)
	return v2, groups, nil
}

// registerOpenAPI serves /openapi/v2 (JSON, or protobuf as kubectl asks),
// /openapi/v3 and /openapi/v3/apis/sunset.dev/v1.
func registerOpenAPI(mux *http.ServeMux) {
	v2, v3, err := buildOpenAPI()
	if err != nil {
		// The documents depend on the code alone: only a type changed
		// without `make generate` fails here, which the tests of the
		// documents catch. The rest of the API serves on regardless.
		unavailable := func(w http.ResponseWriter, _ *http.Request) {
			httpjson.WriteStatus(w, apierrors.NewInternalError(err))
		}
		for _, path := range []string{openAPIV2Path, openAPIV3Path, openAPIV3Path + "/" + openAPIV3GroupVersion} {
			mux.HandleFunc("GET "+path, unavailable)
		}
		return
	}
	handler.NewOpenAPIService(v2).RegisterOpenAPIVersionedService(openAPIV2Path, getOnly{mux})
	mux.HandleFunc("GET "+openAPIV3Path, v3.HandleDiscovery)
	mux.HandleFunc("GET "+openAPIV3Path+"/"+openAPIV3GroupVersion, v3.HandleGroupVersion)
}

// getOnly registers GET (and HEAD) handlers: other methods are answered
// 405 by the mux, as discovery's are.
type getOnly struct{ mux *http.ServeMux }

func (g getOnly) Handle(path string, h http.Handler) { g.mux.Handle("GET "+path, h) }
