package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/store"
)

// definition is what the tests compare of one OpenAPI definition,
// whichever document and encoding it came from.
type definition struct {
	Properties []string
	Required   []string
	GVKs       []metav1.GroupVersionKind
}

// wireDefinitions is what the documents must define, worked out from the
// Go types alone as encoding/json writes them: every struct type the
// served objects, DeleteOptions and Status reach, by definition name. The
// properties and required fields of Sunset's own types are the JSON names
// encoding/json writes (embedded structs flattened) and those it always
// writes (no omitempty or omitzero); meta/v1's are upstream's, and only
// named.
func wireDefinitions(t *testing.T) map[string]*definition {
	t.Helper()
	out := map[string]*definition{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(typ.Elem())
			return
		case reflect.Struct:
		default:
			return
		}
		if typ == reflect.TypeFor[time.Time]() {
			return // a string in RFC 3339, not a definition
		}
		name := friendlyName(definitionKey(typ))
		if out[name] != nil {
			return
		}
		def := &definition{Properties: []string{}, Required: []string{}}
		out[name] = def
		meta := strings.HasPrefix(name, "io.k8s.")
		if _, custom := reflect.New(typ).Interface().(common.OpenAPIDefinitionGetter); custom {
			return
		}
		if _, custom := reflect.New(typ).Elem().Interface().(interface{ OpenAPISchemaType() []string }); custom {
			return
		}
		var fields func(reflect.Type)
		fields = func(typ reflect.Type) {
			for i := range typ.NumField() {
				f := typ.Field(i)
				if !f.IsExported() {
					continue
				}
				tag, tagged := f.Tag.Lookup("json")
				jsonName, opts, _ := strings.Cut(tag, ",")
				if jsonName == "-" {
					continue
				}
				if f.Anonymous && jsonName == "" {
					fields(f.Type)
					continue
				}
				if !tagged || jsonName == "" {
					jsonName = f.Name
				}
				if !meta {
					def.Properties = append(def.Properties, jsonName)
				}
				if !meta && !slices.Contains(strings.Split(opts, ","), "omitempty") && !slices.Contains(strings.Split(opts, ","), "omitzero") {
					def.Required = append(def.Required, jsonName)
				}
				walk(f.Type)
			}
		}
		fields(typ)
		sort.Strings(def.Properties)
		sort.Strings(def.Required)
	}
	for _, obj := range append(slices.Clone(servedObjects), metav1.DeleteOptions{}, metav1.Status{}) {
		walk(reflect.TypeOf(obj))
	}
	for _, obj := range servedObjects {
		name := friendlyName(definitionKey(reflect.TypeOf(obj)))
		out[name].GVKs = []metav1.GroupVersionKind{{Group: sunsetv1.Group, Version: sunsetv1.Version, Kind: reflect.TypeOf(obj).Name()}}
	}
	out["io.k8s.apimachinery.pkg.apis.meta.v1.Status"].GVKs = []metav1.GroupVersionKind{{Version: "v1", Kind: "Status"}}
	out["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"].GVKs = []metav1.GroupVersionKind{{Group: sunsetv1.Group, Version: sunsetv1.Version, Kind: "DeleteOptions"}}
	return out
}

// summarize reduces a kube-openapi schema to a definition; meta/v1's
// properties are left out, as wireDefinitions leaves them.
func summarize(t *testing.T, name string, s *spec.Schema) *definition {
	t.Helper()
	def := &definition{Properties: []string{}, Required: []string{}}
	if !strings.HasPrefix(name, "io.k8s.") {
		for p := range s.Properties {
			def.Properties = append(def.Properties, p)
		}
		def.Required = append(def.Required, s.Required...)
	}
	if raw, ok := s.Extensions["x-kubernetes-group-version-kind"]; ok {
		b, err := json.Marshal(raw)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &def.GVKs))
	}
	sort.Strings(def.Properties)
	sort.Strings(def.Required)
	return def
}

// summarizeProto reduces a definition of the protobuf /openapi/v2, which
// kubectl reads, to a definition.
func summarizeProto(t *testing.T, name string, s *openapi_v2.Schema) *definition {
	t.Helper()
	def := &definition{Properties: []string{}, Required: []string{}}
	if !strings.HasPrefix(name, "io.k8s.") {
		for _, p := range s.GetProperties().GetAdditionalProperties() {
			def.Properties = append(def.Properties, p.GetName())
		}
		def.Required = append(def.Required, s.GetRequired()...)
	}
	for _, ext := range s.GetVendorExtension() {
		if ext.GetName() == "x-kubernetes-group-version-kind" {
			require.NoError(t, yaml.Unmarshal([]byte(ext.GetValue().GetYaml()), &def.GVKs))
		}
	}
	sort.Strings(def.Properties)
	sort.Strings(def.Required)
	return def
}

// openAPIClient reaches srv as kubectl reaches a server.
func openAPIClient(t *testing.T, url string) *discovery.DiscoveryClient {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: url})
	require.NoError(t, err)
	return dc
}

// The paths the documents describe, with their operations.
var wantOperations = []string{
	"DELETE /apis/sunset.dev/v1/apirequestcounts/{name} deleteSunsetDevV1APIRequestCount delete APIRequestCount",
	"GET /apis/sunset.dev/v1/apirequestcounts listSunsetDevV1APIRequestCount list APIRequestCount",
	"GET /apis/sunset.dev/v1/apirequestcounts/{name} readSunsetDevV1APIRequestCount get APIRequestCount",
	"GET /apis/sunset.dev/v1/fieldrequestcounts listSunsetDevV1FieldRequestCount list FieldRequestCount",
	"GET /apis/sunset.dev/v1/fieldrequestcounts/{name} readSunsetDevV1FieldRequestCount get FieldRequestCount",
	"GET /apis/sunset.dev/v1/serverinfo readSunsetDevV1ServerInfo get ServerInfo",
	"GET /apis/sunset.dev/v1/upgradechecks listSunsetDevV1UpgradeCheck list UpgradeCheck",
	"GET /apis/sunset.dev/v1/upgradechecks/{name} readSunsetDevV1UpgradeCheck get UpgradeCheck",
	"GET /apis/sunset.dev/v1/webhookcounts listSunsetDevV1WebhookCount list WebhookCount",
	"GET /apis/sunset.dev/v1/webhookcounts/{name} readSunsetDevV1WebhookCount get WebhookCount",
}

// operationLine is an operation as wantOperations lists it; the group and
// version of each is sunset.dev/v1.
func operationLine(t *testing.T, method, path, id string, ext spec.Extensions) string {
	t.Helper()
	var gvk metav1.GroupVersionKind
	b, err := json.Marshal(ext["x-kubernetes-group-version-kind"])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &gvk))
	require.Equal(t, GroupVersion.String(), gvk.Group+"/"+gvk.Version, id)
	action, _ := ext["x-kubernetes-action"].(string)
	return strings.Join([]string{method, path, id, action, gvk.Kind}, " ")
}

// /openapi/v2, as kubectl reads it (protobuf) and as kube-apiserver's
// aggregator downloads it (JSON), defines every type the objects reach,
// each Sunset type with exactly the fields encoding/json writes, and each
// kind with its group, version and kind; it describes every route.
func TestOpenAPIV2(t *testing.T) {
	srv := kubeServer(t)
	want := wireDefinitions(t)

	doc, err := openAPIClient(t, srv.URL).OpenAPISchema()
	require.NoError(t, err)
	gotProto := map[string]*definition{}
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		gotProto[d.GetName()] = summarizeProto(t, d.GetName(), d.GetValue())
	}
	require.Equal(t, want, gotProto, "protobuf /openapi/v2")

	var swagger spec.Swagger
	code, body := get(t, srv.URL+"/openapi/v2", "application/json")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal([]byte(body), &swagger))
	gotJSON := map[string]*definition{}
	for name, s := range swagger.Definitions {
		gotJSON[name] = summarize(t, name, &s)
	}
	require.Equal(t, want, gotJSON, "JSON /openapi/v2")

	var ops []string
	for path, item := range swagger.Paths.Paths {
		for method, op := range map[string]*spec.Operation{"GET": item.Get, "DELETE": item.Delete, "PUT": item.Put, "POST": item.Post, "PATCH": item.Patch} {
			if op != nil {
				ops = append(ops, operationLine(t, method, path, op.ID, op.Extensions))
				require.Equal(t, []string{"sunsetDev_v1"}, op.Tags, op.ID)
			}
		}
	}
	sort.Strings(ops)
	require.Equal(t, wantOperations, ops)

	// kubectl explain shows the Go doc comments.
	status := swagger.Definitions["com.github.kube-sunset.sunset.api.v1.APIRequestCountStatus"]
	require.Equal(t, "Last24h has 24 entries indexed by UTC hour of day: index 0 is 00:00-00:59. It covers the current hour and the 23 before it.",
		status.Properties["last24h"].Description)
	require.Equal(t, "#/definitions/com.github.kube-sunset.sunset.api.v1.PerResourceAPIRequestLog", status.Properties["last24h"].Items.Schema.Ref.String())
	require.Equal(t, "APIRequestCountStatus is OpenShift's status shape.", status.Description)
}

// /openapi/v3 lists sunset.dev/v1 alone, and its document, as kubectl
// explain reads it, defines the same types as /openapi/v2.
func TestOpenAPIV3(t *testing.T) {
	srv := kubeServer(t)
	want := wireDefinitions(t)

	var root handler3.OpenAPIV3Discovery
	code, body := get(t, srv.URL+"/openapi/v3", "")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal([]byte(body), &root))
	require.Len(t, root.Paths, 1)
	require.True(t, strings.HasPrefix(root.Paths["apis/sunset.dev/v1"].ServerRelativeURL, "/openapi/v3/apis/sunset.dev/v1?hash="), body)

	paths, err := openAPIClient(t, srv.URL).OpenAPIV3().Paths()
	require.NoError(t, err)
	require.Len(t, paths, 1)
	raw, err := paths["apis/sunset.dev/v1"].Schema("application/json")
	require.NoError(t, err)
	var doc spec3.OpenAPI
	require.NoError(t, json.Unmarshal(raw, &doc))
	got := map[string]*definition{}
	for name, s := range doc.Components.Schemas {
		got[name] = summarize(t, name, s)
	}
	require.Equal(t, want, got)

	var ops []string
	for path, item := range doc.Paths.Paths {
		for method, op := range map[string]*spec3.Operation{"GET": item.Get, "DELETE": item.Delete} {
			if op != nil {
				ops = append(ops, operationLine(t, method, path, op.OperationId, op.Extensions))
			}
		}
	}
	sort.Strings(ops)
	require.Equal(t, wantOperations, ops)
	status := doc.Components.Schemas["com.github.kube-sunset.sunset.api.v1.APIRequestCountStatus"]
	require.Equal(t, "#/components/schemas/com.github.kube-sunset.sunset.api.v1.PerResourceAPIRequestLog", status.Properties["last24h"].Items.Schema.Ref.String())

	// A group version the server does not serve, and methods other than
	// GET, are refused.
	code, _ = get(t, srv.URL+"/openapi/v3/apis/apps/v1", "application/json")
	require.Equal(t, http.StatusNotFound, code)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/openapi/v2", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// Every route the documents describe is served by a server over a real
// (empty) store, and takes the query parameters they list: a request with
// all of them, at valid values, is answered by the API (200, or a 404
// Status for an object that is not there), neither refused as a bad
// request nor missed by the mux.
func TestOpenAPIRoutesAreServed(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	mux := http.NewServeMux()
	New(Options{Querier: st, Deleter: st, Webhooks: NewWebhookService(st, nil, nil), Logger: zerolog.Nop()}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	routes, err := sunsetRoutes()
	require.NoError(t, err)
	valid := map[string]string{"users": "5", "hourly": "false", "since": "2h", "removedRelease": "1.37", "removedBefore": "1.38",
		"state": "deprecated", "class": "critical", "excludeSystem": "true", "warningsAsErrors": "false", "dryRun": "All",
		"limit": "500", "timeoutSeconds": "5", "allowWatchBookmarks": "false", "sendInitialEvents": "false", "watch": "false",
		"includeObject": "Metadata", "pretty": "false"}
	names := map[string]string{"apirequestcounts": "endpoints.v1", "fieldrequestcounts": "kube-proxy-version", "upgradechecks": "1.37", "webhookcounts": "cfg.hook"}
	var answers []string
	for _, route := range routes {
		path := route.Path()
		if resource, ok := strings.CutSuffix(strings.TrimPrefix(path, "/apis/sunset.dev/v1/"), "/{name}"); ok {
			path = strings.TrimSuffix(path, "{name}") + names[resource]
		}
		query := url.Values{}
		for _, p := range route.Parameters() {
			if p.Kind() == common.QueryParameterKind {
				query.Set(p.Name(), valid[p.Name()])
			}
		}
		req, err := http.NewRequest(route.Method(), srv.URL+path+"?"+query.Encode(), nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s %s", route.Method(), req.URL)
		answers = append(answers, fmt.Sprintf("%s %s %d", route.Method(), path, resp.StatusCode))
	}
	require.Equal(t, []string{
		"GET /apis/sunset.dev/v1/apirequestcounts 200",
		"GET /apis/sunset.dev/v1/apirequestcounts/endpoints.v1 404",
		"GET /apis/sunset.dev/v1/fieldrequestcounts 200",
		"GET /apis/sunset.dev/v1/fieldrequestcounts/kube-proxy-version 200",
		"GET /apis/sunset.dev/v1/webhookcounts 200",
		"GET /apis/sunset.dev/v1/webhookcounts/cfg.hook 404",
		"GET /apis/sunset.dev/v1/upgradechecks 200",
		"GET /apis/sunset.dev/v1/upgradechecks/1.37 200",
		"DELETE /apis/sunset.dev/v1/apirequestcounts/endpoints.v1 404",
		"GET /apis/sunset.dev/v1/serverinfo 200",
	}, answers)
}

// Clients that ask for aggregated discovery (kube-apiserver's aggregator,
// kubectl) get sunset.dev/v1 in one document, with exactly APIResources
// and their verbs; the same ETag answers 304; others get the APIGroupList.
func TestAggregatedDiscovery(t *testing.T) {
	srv := kubeServer(t)
	const accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/apis", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", accept+",application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var list apidiscoveryv2.APIGroupDiscoveryList
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, accept, resp.Header.Get("Content-Type"))
	require.Equal(t, "APIGroupDiscoveryList", list.Kind)
	require.Len(t, list.Items, 1)
	group := list.Items[0]
	require.Equal(t, sunsetv1.Group, group.Name)
	require.Len(t, group.Versions, 1)
	require.Equal(t, sunsetv1.Version, group.Versions[0].Version)
	require.Equal(t, apidiscoveryv2.DiscoveryFreshnessCurrent, group.Versions[0].Freshness)
	var got, want []string
	for _, r := range group.Versions[0].Resources {
		got = append(got, fmt.Sprintf("%s %s %s %s %s %v", r.Resource, r.SingularResource, r.ResponseKind.Kind, r.Scope, strings.Join(r.Verbs, ","), r.Categories))
	}
	for _, r := range APIResources() {
		want = append(want, fmt.Sprintf("%s %s %s Cluster %s %v", r.Name, r.SingularName, r.Kind, strings.Join(r.Verbs, ","), r.Categories))
	}
	require.Equal(t, want, got)
	require.Equal(t, []string{
		"apirequestcounts apirequestcount APIRequestCount Cluster get,list,delete [sunset]",
		"fieldrequestcounts fieldrequestcount FieldRequestCount Cluster get,list [sunset]",
		"webhookcounts webhookcount WebhookCount Cluster get,list [sunset]",
		"upgradechecks upgradecheck UpgradeCheck Cluster get,list []",
	}, got)

	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotModified, resp.StatusCode)

	// client-go, as kubectl uses it, reads the aggregated document.
	groups, resources, err := openAPIClient(t, srv.URL).ServerGroupsAndResources()
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Len(t, resources, 1)
	require.Equal(t, "sunset.dev/v1", resources[0].GroupVersion)
	require.Len(t, resources[0].APIResources, len(APIResources()))

	code, body := get(t, srv.URL+"/apis", "application/json")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"kind":"APIGroupList","groups":[{"name":"sunset.dev","versions":[{"groupVersion":"sunset.dev/v1","version":"v1"}],"preferredVersion":{"groupVersion":"sunset.dev/v1","version":"v1"}}]}`, body)
}

// Every parameter a route takes is described.
func TestQueryParamsDescribed(t *testing.T) {
	_, err := queryParams([]string{"users", "nonsense"})
	require.EqualError(t, err, `query parameter "nonsense" has no description in queryParamDocs (api/openapi.go)`)
	routes, err := sunsetRoutes()
	require.NoError(t, err)
	for _, route := range routes {
		for _, p := range route.Parameters() {
			require.NotEmpty(t, p.Description(), "%s %s: %s", route.Method(), route.Path(), p.Name())
		}
	}
}

// kubectl get sends limit=500 to the list of any resource that discovery
// names: each discovered resource has a list route that takes it, and
// TestOpenAPIRoutesAreServed proves the server answers every documented
// parameter.
func TestDiscoveredListsTakeKubectlsLimit(t *testing.T) {
	routes, err := sunsetRoutes()
	require.NoError(t, err)
	for _, res := range APIResources() {
		i := slices.IndexFunc(routes, func(r common.Route) bool {
			return r.Path() == "/apis/"+sunsetv1.APIVersion+"/"+res.Name && r.(openAPIRoute).action == "list"
		})
		require.GreaterOrEqual(t, i, 0, "no list route for %s", res.Name)
		var names []string
		for _, p := range routes[i].(openAPIRoute).params {
			names = append(names, p.Name())
		}
		require.Contains(t, names, "limit", res.Name)
	}
}
