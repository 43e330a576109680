package app_test

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
	"github.com/kube-sunset/sunset/internal/testutil/golden"
)

// The 8 captured bodies hold 66 deprecated requests (ResponseComplete with
// k8s.io/deprecated: "true"): 2 componentstatuses.v1, 35 endpoints.v1,
// 1 widgets.v1alpha1 and 28 widgets.v1beta1 of e2e.example.com. The golden
// files were checked by hand against client-output.txt, and their numbers
// are checked against capturedCount.
const capturedDeprecated = 66

// capturedCount counts the captured bodies as master-0 of cluster default
// sends them, independently of Sunset (internal/testutil/auditcount).
func capturedCount(t *testing.T) *auditcount.Counter {
	t.Helper()
	c := auditcount.New(auditcount.Options{SystemUsers: config.Default().SystemUsers, Lifecycle: auditcount.BuiltinLifecycle(t)})
	for _, b := range capturedBodies(t) {
		c.AddList(t, "default", "master-0", b)
	}
	require.Equal(t, int64(capturedDeprecated), c.Count(nil))
	return c
}

// requireGoldenCounts requires the numbers of a golden file of
// APIRequestCounts to be those of the independent count.
func requireGoldenCounts(t *testing.T, name string, c *auditcount.Counter) {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	c.RequireAPIRequestCounts(t, testNow, nil, b)
}

func TestReplayCapturedBodies(t *testing.T) {
	want := capturedCount(t)
	requireGoldenCounts(t, "captured-list.golden.json", want)
	requireGoldenCounts(t, "captured-widgets-users2.golden.json", want)

	s := start(t, testConfig(t))
	require.Equal(t, capturedDeprecated, s.postCaptured("/audit/webhook/master-0"))

	code, body := s.get("/apis/sunset.dev/v1/apirequestcounts")
	require.Equal(t, http.StatusOK, code)
	golden.AssertJSON(t, "testdata/captured-list.golden.json", body)
	want.RequireAPIRequestCounts(t, testNow, nil, body)

	var list sunsetv1.APIRequestCountList
	require.NoError(t, json.Unmarshal(body, &list))
	totals := map[string]int64{}
	for _, item := range list.Items {
		totals[item.Metadata.Name] = item.Status.RequestCount
	}
	require.Equal(t, map[string]int64{
		"componentstatuses.v1":             2,
		"endpoints.v1":                     35,
		"widgets.v1alpha1.e2e.example.com": 1,
		"widgets.v1beta1.e2e.example.com":  28,
	}, totals)
	require.Equal(t, want.ByAPI(nil), totals)

	code, body = s.get("/apis/sunset.dev/v1/apirequestcounts/widgets.v1beta1.e2e.example.com?users=2")
	require.Equal(t, http.StatusOK, code)
	golden.AssertJSON(t, "testdata/captured-widgets-users2.golden.json", body)
}

func TestDuplicateDeliveryCountsOnceAcrossRestart(t *testing.T) {
	s := start(t, testConfig(t))
	require.Equal(t, capturedDeprecated, s.postCaptured("/audit/webhook/master-0"))
	require.Equal(t, 0, s.postCaptured("/audit/webhook/master-0"))
	_, before := s.get("/apis/sunset.dev/v1/apirequestcounts")

	s = s.restart()
	// The third delivery, after a restart: the dedupe marks are on disk.
	require.Equal(t, 0, s.postCaptured("/audit/webhook/master-0"))
	_, after := s.get("/apis/sunset.dev/v1/apirequestcounts")
	require.JSONEq(t, string(before), string(after))
	golden.AssertJSON(t, "testdata/captured-list.golden.json", after)
	capturedCount(t).RequireAPIRequestCounts(t, testNow, nil, after)
}

func TestRestartServesIdenticalJSON(t *testing.T) {
	s := start(t, testConfig(t))
	s.postCaptured("/audit/webhook/prod/master-1")
	paths := []string{
		"/apis/sunset.dev/v1/apirequestcounts",
		"/apis/sunset.dev/v1/apirequestcounts/endpoints.v1",
		"/apis/sunset.dev/v1/apirequestcounts/componentstatuses.v1?users=1",
	}
	before := map[string]string{}
	for _, p := range paths {
		code, body := s.get(p)
		require.Equal(t, http.StatusOK, code, p)
		before[p] = string(body)
	}
	s = s.restart()
	for _, p := range paths {
		code, body := s.get(p)
		require.Equal(t, http.StatusOK, code, p)
		require.Equal(t, before[p], string(body), p)
	}
}
