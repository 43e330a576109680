package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// fixedCounts is a hand fake of the Querier the package declares: fixed fixedCounts
// for a few APIs in the current hour.
type fixedCounts map[string]map[string]uint64 // API -> username -> requests

func (c fixedCounts) APIs() []store.APIInfo {
	var out []store.APIInfo
	for _, name := range []string{"cronjobs.v1beta1.batch", "endpoints.v1", "volumeattributesclasses.v1beta1.storage.k8s.io"} {
		if _, ok := c[name]; ok {
			out = append(out, store.APIInfo{Cluster: "prod", API: name, Nodes: map[string]time.Time{"master-0": buildNow.Truncate(time.Hour)}})
		}
	}
	return out
}

func (c fixedCounts) ScanCounts(cluster, api string, from, to time.Time, fn func(countkey.CountKey, uint64) error) error {
	if hour := buildNow.Truncate(time.Hour); hour.Before(from) || hour.After(to) {
		return nil
	}
	for user, n := range c[api] {
		if err := fn(countkey.CountKey{Cluster: cluster, API: api,
			Cell: countkey.Cell{Hour: buildNow.Truncate(time.Hour), Node: "master-0", Username: user, UserAgent: "kubectl", Verb: "list"}},
			n); err != nil {
			return err
		}
	}
	return nil
}

func (c fixedCounts) WorkloadsOf(string, string, []store.ClientID) (map[store.ClientID]store.Workload, error) {
	return nil, nil
}

func (fixedCounts) FieldRules() []store.FieldRuleInfo { return nil }

func (fixedCounts) ScanFieldRuleCounts(string, string, time.Time, time.Time, func(store.FieldRuleKey, uint64) error) error {
	return nil
}

func (fixedCounts) FieldRuleWorkloadsOf(string, string, []store.ClientID) (map[store.ClientID]store.Workload, error) {
	return nil, nil
}

func kubeServer(t *testing.T) *httptest.Server {
	t.Helper()
	h := New(Options{Querier: fixedCounts{
		"cronjobs.v1beta1.batch": {"bob": 4},
		"endpoints.v1":           {"alice": 2, "bob": 5},
		"volumeattributesclasses.v1beta1.storage.k8s.io": {"carol": 3},
	}, Logger: zerolog.Nop(), Now: func() time.Time { return buildNow }})
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, accept string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// getOK requires url to answer 200 to a GET with accept and decodes the
// answer.
func getOK[T any](t *testing.T, url, accept string) T {
	t.Helper()
	code, body := get(t, url, accept)
	require.Equal(t, 200, code, body)
	var v T
	require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	return v
}

// Discovery is what kube-apiserver's aggregator and kubectl read.
func TestDiscovery(t *testing.T) {
	srv := kubeServer(t)
	list := getOK[metav1.APIResourceList](t, srv.URL+"/apis/sunset.dev/v1", "application/json")
	require.Equal(t, "sunset.dev/v1", list.GroupVersion)
	var got []string
	for _, r := range list.APIResources {
		got = append(got, r.Name+" "+r.Kind+" "+strings.Join(r.Verbs, ",")+" "+strings.Join(r.Categories, ","))
		require.False(t, r.Namespaced, r.Name)
	}
	require.Equal(t, []string{
		"apirequestcounts APIRequestCount get,list,delete sunset",
		"fieldrequestcounts FieldRequestCount get,list sunset",
		"webhookcounts WebhookCount get,list sunset",
		"upgradechecks UpgradeCheck get,list ",
	}, got)

	code, body := get(t, srv.URL+"/apis/sunset.dev", "application/json")
	require.Equal(t, 200, code, body)
	require.JSONEq(t, `{"kind":"APIGroup","name":"sunset.dev","versions":[{"groupVersion":"sunset.dev/v1","version":"v1"}],"preferredVersion":{"groupVersion":"sunset.dev/v1","version":"v1"}}`, body)
	code, body = get(t, srv.URL+"/apis", "application/json")
	require.Equal(t, 200, code, body)
	require.JSONEq(t, `{"kind":"APIGroupList","groups":[{"name":"sunset.dev","versions":[{"groupVersion":"sunset.dev/v1","version":"v1"}],"preferredVersion":{"groupVersion":"sunset.dev/v1","version":"v1"}}]}`, body)
}

// kubectl's Accept header gets a Table with OpenShift's printer columns
// and Sunset's wide ones; a plain Accept gets the objects.
func TestTable(t *testing.T) {
	srv := kubeServer(t)
	const kubectlAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
	table := getOK[metav1.Table](t, srv.URL+"/apis/sunset.dev/v1/apirequestcounts", kubectlAccept)
	require.Equal(t, "Table", table.Kind)
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name+"/"+c.Type+"/"+string(rune('0'+c.Priority)))
	}
	require.Equal(t, []string{"Name/string/0", "RemovedInRelease/string/0", "RequestsInCurrentHour/integer/0", "RequestsInLast24h/integer/0",
		"Replacement/string/1", "TopUser/string/1"}, cols)
	var rows []string
	for _, r := range table.Rows {
		b, err := json.Marshal(r.Cells)
		require.NoError(t, err)
		rows = append(rows, string(b))
		var meta metav1.PartialObjectMetadata
		require.NoError(t, json.Unmarshal(r.Object.Raw, &meta))
		require.Equal(t, "PartialObjectMetadata", meta.Kind, "includeObject defaults to Metadata")
		require.Equal(t, r.Cells[0], meta.Name)
	}
	require.Equal(t, []string{
		`["cronjobs.v1beta1.batch","1.25",4,4,"batch/v1 CronJob","bob"]`,
		`["endpoints.v1","",7,7,"discovery.k8s.io/v1 EndpointSlice","bob"]`,
		`["volumeattributesclasses.v1beta1.storage.k8s.io","1.37",3,3,"storage.k8s.io/v1 VolumeAttributesClass","carol"]`,
	}, rows)

	table = getOK[metav1.Table](t, srv.URL+"/apis/sunset.dev/v1/apirequestcounts/endpoints.v1?includeObject=Object", kubectlAccept)
	require.Len(t, table.Rows, 1)
	var obj sunsetv1.APIRequestCount
	require.NoError(t, json.Unmarshal(table.Rows[0].Object.Raw, &obj))
	require.Equal(t, int64(7), obj.Status.RequestCount)

	// Programs get compact JSON, people indented JSON, as from
	// kube-apiserver.
	code, body := get(t, srv.URL+"/apis/sunset.dev/v1/apirequestcounts/endpoints.v1", "")
	require.Equal(t, 200, code, body)
	require.True(t, strings.HasPrefix(body, `{"kind":"APIRequestCount",`), body)
	code, body = get(t, srv.URL+"/apis/sunset.dev/v1/apirequestcounts/endpoints.v1?pretty=true", "")
	require.Equal(t, 200, code, body)
	require.True(t, strings.HasPrefix(body, "{\n  \"kind\": \"APIRequestCount\",\n"), body)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/apis/sunset.dev/v1/apirequestcounts", nil)
	require.NoError(t, err)
	req.Header.Set("User-Agent", "curl/8.14.1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.True(t, strings.HasPrefix(string(raw), "{\n  \"kind\": \"APIRequestCountList\",\n"), string(raw))
	code, body = get(t, srv.URL+"/apis/sunset.dev/v1/apirequestcounts", "application/vnd.kubernetes.protobuf")
	require.Equal(t, http.StatusNotAcceptable, code, body)
}

// Labels and field selectors choose, as `kubectl get -l` and
// --field-selector do; bad ones are a 400 Status.
func TestSelectors(t *testing.T) {
	srv := kubeServer(t)
	names := func(query string) []string {
		l := getOK[sunsetv1.APIRequestCountList](t, srv.URL+"/apis/sunset.dev/v1/apirequestcounts?"+query, "")
		out := []string{}
		for _, it := range l.Items {
			out = append(out, it.Metadata.Name)
		}
		return out
	}
	require.Equal(t, []string{"volumeattributesclasses.v1beta1.storage.k8s.io"}, names("labelSelector=sunset.dev/removed-in-release%3D1.37"))
	require.Equal(t, []string{"cronjobs.v1beta1.batch", "volumeattributesclasses.v1beta1.storage.k8s.io"}, names("labelSelector=sunset.dev/removed-in-release"))
	require.Equal(t, []string{"endpoints.v1"}, names("labelSelector=!sunset.dev/removed-in-release"))
	require.Equal(t, []string{"cronjobs.v1beta1.batch", "endpoints.v1", "volumeattributesclasses.v1beta1.storage.k8s.io"}, names("labelSelector=sunset.dev/state%3Ddeprecated&limit=500"))
	require.Equal(t, []string{"endpoints.v1"}, names("fieldSelector=metadata.name%3Dendpoints.v1"))
	require.Equal(t, []string{"cronjobs.v1beta1.batch", "volumeattributesclasses.v1beta1.storage.k8s.io"}, names("fieldSelector=metadata.name!%3Dendpoints.v1"))

	for query, msg := range map[string]string{
		"fieldSelector=status.requestCount%3D1": "field label not supported: status.requestCount",
		"labelSelector=%3D%3D":                  "labelSelector: ",
		"watch=true":                            "",
	} {
		code, body := get(t, srv.URL+"/apis/sunset.dev/v1/apirequestcounts?"+query, "")
		var st metav1.Status
		require.NoError(t, json.Unmarshal([]byte(body), &st), body)
		require.Equal(t, "Status", st.Kind)
		if query == "watch=true" {
			require.Equal(t, http.StatusMethodNotAllowed, code)
			require.Equal(t, metav1.StatusReasonMethodNotAllowed, st.Reason)
			continue
		}
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, st.Message, msg)
	}
}

// ?pretty= chooses indented or compact JSON on every GET, serverinfo and
// the upgrade checks included, whoever the client is.
func TestPrettyOnEveryGet(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	mux := http.NewServeMux()
	New(Options{Querier: st, Webhooks: NewWebhookService(st, nil, nil), Logger: zerolog.Nop(), Now: func() time.Time { return buildNow }}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, path := range []string{"serverinfo", "apirequestcounts", "fieldrequestcounts", "webhookcounts", "upgradechecks", "upgradechecks/1.37"} {
		url := srv.URL + "/apis/sunset.dev/v1/" + path
		code, compact := get(t, url+"?pretty=false", "")
		require.Equal(t, http.StatusOK, code, "%s: %s", path, compact)
		require.Equal(t, 1, strings.Count(compact, "\n"), "%s: %s", path, compact)
		code, pretty := get(t, url+"?pretty=true", "")
		require.Equal(t, http.StatusOK, code, "%s: %s", path, pretty)
		var want bytes.Buffer
		require.NoError(t, json.Indent(&want, []byte(compact), "", "  "))
		require.Equal(t, want.String(), pretty, path)
	}
}
