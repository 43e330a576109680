package api

import (
	"fmt"
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/httpjson"
)

// GroupVersion is sunset.dev/v1.
var GroupVersion = schema.GroupVersion{Group: sunsetv1.Group, Version: sunsetv1.Version}

// Resources, as kube-apiserver's aggregator and kubectl know them.
var (
	APIRequestCountsResource   = GroupVersion.WithResource("apirequestcounts")
	FieldRequestCountsResource = GroupVersion.WithResource("fieldrequestcounts")
	WebhookCountsResource      = GroupVersion.WithResource("webhookcounts")
	UpgradeChecksResource      = GroupVersion.WithResource("upgradechecks")
)

// Category groups the resources that hold counts (apirequestcounts,
// fieldrequestcounts, webhookcounts), so `kubectl get sunset` lists them.
const Category = "sunset"

// APIResources is the discovery of sunset.dev/v1.
func APIResources() []metav1.APIResource {
	verbs := metav1.Verbs{"get", "list", "delete"}
	return []metav1.APIResource{
		{Name: APIRequestCountsResource.Resource, SingularName: "apirequestcount", Kind: "APIRequestCount",
			Verbs: verbs, Categories: []string{Category}},
		{Name: FieldRequestCountsResource.Resource, SingularName: "fieldrequestcount", Kind: "FieldRequestCount",
			Verbs: metav1.Verbs{"get", "list"}, Categories: []string{Category}},
		{Name: WebhookCountsResource.Resource, SingularName: "webhookcount", Kind: "WebhookCount",
			Verbs: metav1.Verbs{"get", "list"}, Categories: []string{Category}},
		// Not in the category: a check is a verdict, not counts.
		{Name: UpgradeChecksResource.Resource, SingularName: "upgradecheck", Kind: "UpgradeCheck",
			Verbs: metav1.Verbs{"get", "list"}},
	}
}

// apiGroup is sunset.dev as discovery describes it.
var apiGroup = metav1.APIGroup{
	Name:             sunsetv1.Group,
	Versions:         []metav1.GroupVersionForDiscovery{{GroupVersion: sunsetv1.APIVersion, Version: sunsetv1.Version}},
	PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: sunsetv1.APIVersion, Version: sunsetv1.Version},
}

// registerDiscovery serves what kube-apiserver's aggregator and kubectl
// read to learn the API: /apis, /apis/sunset.dev and /apis/sunset.dev/v1
// with k8s.io/apiserver's discovery handlers, and the OpenAPI documents
// (registerOpenAPI). /apis answers the aggregated discovery document
// (apidiscovery.k8s.io/v2, every resource in one answer, with an ETag)
// to clients that ask for it, as the aggregator and kubectl do, and the
// APIGroupList to others.
func registerDiscovery(mux *http.ServeMux) {
	codecs := httpjson.Codecs.WithoutConversion()
	legacy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list := &metav1.APIGroupList{Groups: []metav1.APIGroup{apiGroup}}
		responsewriters.WriteObjectNegotiated(codecs, negotiation.DefaultEndpointRestrictions, schema.GroupVersion{}, w, r, http.StatusOK, list, false)
	})
	mux.Handle("GET /apis", aggregated.WrapAggregatedDiscoveryToHandler(legacy, aggregatedDiscovery(), nil))
	mux.Handle("GET /apis/"+sunsetv1.Group, discovery.NewAPIGroupHandler(codecs, apiGroup))
	mux.Handle("GET /apis/"+sunsetv1.APIVersion, discovery.NewAPIVersionHandler(codecs, GroupVersion, discovery.APIResourceListerFunc(APIResources)))
	registerOpenAPI(mux)
}

// aggregatedDiscovery is sunset.dev/v1 as one aggregated discovery
// document: APIResources converted as kube-apiserver converts an
// APIResourceList.
func aggregatedDiscovery() aggregated.ResourceManager {
	resources, err := endpoints.ConvertGroupVersionIntoToDiscovery(APIResources())
	if err != nil {
		// Only a subresource whose scope differs from its resource's
		// fails, and APIResources is fixed.
		panic(fmt.Sprintf("APIResources: %v", err))
	}
	m := aggregated.NewResourceManager("apis")
	m.AddGroupVersion(sunsetv1.Group, apidiscoveryv2.APIVersionDiscovery{Version: sunsetv1.Version, Resources: resources, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
	return m
}

// tableRestrictions accepts plain JSON and the meta.k8s.io/v1 Table
// transform that `kubectl get` asks for.
type tableRestrictions struct{}

func (tableRestrictions) AllowsMediaTypeTransform(_, _ string, gvk *schema.GroupVersionKind) bool {
	return gvk == nil || (gvk.Kind == "Table" && gvk.Group == metav1.GroupName && gvk.Version == "v1")
}
func (tableRestrictions) AllowsServerVersion(string) bool { return false }
func (tableRestrictions) AllowsStreamSchema(string) bool  { return false }

// wantsTable reports whether the Accept header asks for a Table, as
// `kubectl get` does. A client that accepts neither JSON nor a Table gets
// an error.
func wantsTable(r *http.Request) (bool, error) {
	if r.Header.Get("Accept") == "" {
		return false, nil
	}
	opts, info, err := negotiation.NegotiateOutputMediaType(r, httpjson.Codecs.WithoutConversion(), tableRestrictions{})
	if err != nil {
		return false, err
	}
	if info.MediaType != runtime.ContentTypeJSON {
		return false, fmt.Errorf("only application/json is supported, not %s", info.MediaType)
	}
	return opts.Convert != nil, nil
}

// Table columns: OpenShift's printer columns for APIRequestCount, then
// Sunset's, shown by `kubectl get -o wide`.
var tableColumns = []metav1.TableColumnDefinition{
	nameColumn,
	{Name: "RemovedInRelease", Type: "string", Description: "Release in which an API will be removed."},
	{Name: "RequestsInCurrentHour", Type: "integer", Description: "Number of requests in the current hour."},
	{Name: "RequestsInLast24h", Type: "integer", Description: "Number of requests in the last 24h."},
	{Name: "Replacement", Type: "string", Priority: 1, Description: "The API to migrate to (group/version Kind)."},
	{Name: "TopUser", Type: "string", Priority: 1, Description: "The user with the most requests in the last 24h among those reported."},
}

// tableRow is one object's cells and metadata.
func tableRow(meta metav1.ObjectMeta, st sunsetv1.APIRequestCountStatus, full any, include string) (metav1.TableRow, error) {
	replacement := ""
	if r := st.Replacement; r != nil {
		replacement = strings.TrimPrefix(r.Group+"/"+r.Version, "/") + " " + r.Kind
	}
	return objectRow([]any{meta.Name, st.RemovedInRelease, st.CurrentHour.RequestCount, st.RequestCount, replacement, topUser(st)}, meta, full, include)
}

// topUser is the username with the most requests in the last 24 hours
// among the users each node and hour reports.
func topUser(st sunsetv1.APIRequestCountStatus) string {
	byUser := map[string]int64{}
	for _, h := range st.Last24h {
		for _, n := range h.ByNode {
			for _, u := range n.ByUser {
				byUser[u.UserName] += u.RequestCount
			}
		}
	}
	best, most := "", int64(0)
	for name, n := range byUser {
		if n > most || (n == most && name < best) {
			best, most = name, n
		}
	}
	return best
}

// newTable starts a Table with the columns of an APIRequestCount.
func newTable() *metav1.Table { return newTableOf(tableColumns) }

// includeObject reads the Table's ?includeObject=None|Metadata|Object.
func includeObject(r *http.Request) (string, error) {
	switch v := r.URL.Query().Get("includeObject"); v {
	case "", "Metadata":
		return "Metadata", nil
	case "None", "Object":
		return v, nil
	default:
		return "", fmt.Errorf("includeObject %q is not one of None, Metadata, Object", v)
	}
}
