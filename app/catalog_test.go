package app_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/config"
)

func listNames(t *testing.T, s *server, query string) []string {
	t.Helper()
	code, body := s.get("/apis/sunset.dev/v1/apirequestcounts" + query)
	require.Equal(t, 200, code, string(body))
	var list sunsetv1.APIRequestCountList
	require.NoError(t, json.Unmarshal(body, &list))
	names := []string{}
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	return names
}

func TestAlreadyRemovedAPIsAndListFilters(t *testing.T) {
	cfg := testConfig(t)
	cfg.Clusters = map[string]config.ClusterConfig{"old": {Version: "v1.21.14"}}
	cfg.Catalog.Extra = []catalog.Entry{{Group: "e2e.example.com", Version: "v1beta1", Resource: "widgets", Kind: "Widget", DeprecatedIn: "1.30",
		Replacement: &catalog.Ref{Group: "e2e.example.com", Version: "v1", Kind: "Widget", Resource: "widgets"}}}
	s := start(t, cfg)
	s.postCaptured("/audit/webhook/master-0")

	ingress := map[string]any{"resource": "ingresses", "apiGroup": "extensions", "apiVersion": "v1beta1", "namespace": "web"}
	cron := map[string]any{"resource": "cronjobs", "apiGroup": "batch", "apiVersion": "v1beta1", "namespace": "ci"}
	vac := map[string]any{"resource": "volumeattributesclasses", "apiGroup": "storage.k8s.io", "apiVersion": "v1beta1"}
	notFound := map[string]any{"code": 404}
	code, resp := s.post("/audit/webhook/new/apiserver-1", "application/json", eventList(
		// A 1.22+ apiserver answers 404 to removed APIs and does not annotate.
		ev("rm-1", "objectRef", ingress, "annotations", nil, "responseStatus", notFound, "user", map[string]any{"username": "system:serviceaccount:web:legacy-controller"}),
		ev("rm-2", "objectRef", ingress, "annotations", nil, "responseStatus", notFound, "user", map[string]any{"username": "system:serviceaccount:web:legacy-controller"}),
		ev("rm-3", "objectRef", cron, "annotations", nil, "responseStatus", notFound, "verb", "create"),
		ev("vac-1", "objectRef", vac, "annotations", map[string]any{"k8s.io/deprecated": "true", "k8s.io/removed-release": "1.37"}),
	))
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"cluster":"new","node":"apiserver-1","counted":4,"duplicates":0,"skipped":0,"invalid":0}`, string(resp))
	// On a 1.21 cluster the same 404 means a missing object, not a removed API.
	code, resp = s.post("/audit/webhook/old/apiserver-1", "application/json", eventList(
		ev("old-1", "objectRef", ingress, "annotations", nil, "responseStatus", notFound)))
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"cluster":"old","node":"apiserver-1","counted":1,"duplicates":0,"skipped":0,"invalid":0}`, string(resp))

	ing := getAPI(t, s, "ingresses.v1beta1.extensions")
	require.Equal(t, "1.22", ing.Status.RemovedInRelease)
	require.Equal(t, "1.14", ing.Status.DeprecatedInRelease)
	require.Equal(t, "extensions/v1beta1 Ingress is deprecated in v1.14+, unavailable in v1.22+; use networking.k8s.io/v1 Ingress", ing.Status.Warning)
	require.Equal(t, &sunsetv1.Replacement{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress", Resource: "ingresses"}, ing.Status.Replacement)
	require.True(t, ing.Status.Removed)
	require.Equal(t, int64(3), ing.Status.RequestCount)
	require.Equal(t, int64(2), ing.Status.RemovedRequestCount)
	requireNodes(t, ing.Status.CurrentHour, `[
		{"nodeName":"apiserver-1","cluster":"new","requestCount":2,"byUser":[
			{"username":"system:serviceaccount:web:legacy-controller","userAgent":"kubectl/v1.32.4","requestCount":2,"removedRequestCount":2,"byVerb":[{"verb":"list","requestCount":2}]}]},
		{"nodeName":"apiserver-1","cluster":"old","requestCount":1,"byUser":[
			{"username":"alice","userAgent":"kubectl/v1.32.4","requestCount":1,"byVerb":[{"verb":"list","requestCount":1}]}]}]`)

	// A CRD described in catalog.extra gets its replacement and warning.
	w := getAPI(t, s, "widgets.v1beta1.e2e.example.com")
	require.Equal(t, "e2e.example.com/v1beta1 Widget is deprecated in v1.30+; use e2e.example.com/v1 Widget", w.Status.Warning)
	require.Empty(t, w.Status.RemovedInRelease)

	all := []string{"componentstatuses.v1", "cronjobs.v1beta1.batch", "endpoints.v1", "ingresses.v1beta1.extensions",
		"volumeattributesclasses.v1beta1.storage.k8s.io", "widgets.v1alpha1.e2e.example.com", "widgets.v1beta1.e2e.example.com"}
	require.Equal(t, all, listNames(t, s, ""))
	require.Equal(t, []string{"cronjobs.v1beta1.batch", "ingresses.v1beta1.extensions"}, listNames(t, s, "?state=removed"))
	require.Equal(t, []string{"componentstatuses.v1", "endpoints.v1", "ingresses.v1beta1.extensions",
		"volumeattributesclasses.v1beta1.storage.k8s.io", "widgets.v1alpha1.e2e.example.com", "widgets.v1beta1.e2e.example.com"}, listNames(t, s, "?state=deprecated"))
	require.Equal(t, []string{"volumeattributesclasses.v1beta1.storage.k8s.io"}, listNames(t, s, "?removedRelease=1.37"))
	require.Equal(t, []string{"cronjobs.v1beta1.batch", "ingresses.v1beta1.extensions"}, listNames(t, s, "?removedBefore=1.37"))
	require.Equal(t, []string{"cronjobs.v1beta1.batch", "ingresses.v1beta1.extensions", "volumeattributesclasses.v1beta1.storage.k8s.io"}, listNames(t, s, "?removedBefore=v1.38"))
	require.Equal(t, []string{"ingresses.v1beta1.extensions"}, listNames(t, s, "?removedBefore=1.38&state=removed&cluster=new&removedRelease=1.22"))

	for query, msg := range map[string]string{
		"?state=gone":                 `state "gone" is not valid; use deprecated or removed`,
		"?removedRelease=next":        `removedRelease: "next" is not a Kubernetes release such as 1.37`,
		"?removedBefore=1&users=-1":   `removedBefore: "1" is not a Kubernetes release such as 1.37; users must be a whole number from 0 to 100 (0 means the default, 10)`,
		"/endpoints.v1?state=removed": `unknown parameter "state" (known: cluster, hourly, since, users)`,
	} {
		code, body := s.get("/apis/sunset.dev/v1/apirequestcounts" + query)
		require.Equal(t, 400, code, query)
		require.JSONEq(t, statusBody(400, "BadRequest", msg), string(body), query)
	}
}

func TestClusterAndCatalogConfigIsValidated(t *testing.T) {
	cfg := testConfig(t)
	cfg.Clusters = map[string]config.ClusterConfig{"prod": {Version: "latest"}, "dev": {Version: "1.30"}}
	cfg.Catalog.Extra = []catalog.Entry{{Group: "cert-manager.io", Version: "v1alpha2", Resource: "certificates", Kind: "Certificate", DeprecatedIn: "1.24", RemovedIn: "1.20"}}
	_, err := app.New(cfg, app.Options{})
	require.EqualError(t, err, "catalog.extra[0]: cert-manager.io/v1alpha2 certificates: removedIn 1.20 is before deprecatedIn 1.24\n"+
		`clusters.prod.version: "latest" is not a Kubernetes release such as 1.37`)
}
