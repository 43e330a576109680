package app_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// OpenShift's published CRD schema for apiserver.openshift.io/v1
// APIRequestCount (openshift/api, apiserver/v1) sets these limits. Sunset's
// objects must keep within them, so that tools validating against that
// schema accept them; additional fields are allowed.
const (
	schemaMaxHours         = 24
	schemaMaxNodes         = 512
	schemaMaxUsers         = 500
	schemaMaxVerbs         = 10
	schemaMaxVerbBytes     = 20
	schemaMaxNodeNameBytes = 512
	schemaMaxUsernameBytes = 512
	schemaMaxAgentBytes    = 1024
	schemaMaxReleaseBytes  = 64
	schemaMaxUsersToReport = 100
)

var schemaRelease = regexp.MustCompile(`^[0-9][0-9]*\.[0-9][0-9]*$`)

// schemaCheck collects every place an object breaks the schema, by JSON
// path, reading the wire form so that a missing required field is seen.
type schemaCheck struct{ problems []string }

func (c *schemaCheck) failf(path, format string, args ...any) {
	c.problems = append(c.problems, path+": "+fmt.Sprintf(format, args...))
}

func (c *schemaCheck) count(path string, obj map[string]any) {
	n, ok := obj["requestCount"].(float64)
	if !ok {
		c.failf(path, "requestCount is required")
	} else if n < 0 {
		c.failf(path, "requestCount %v is negative", n)
	}
}

func (c *schemaCheck) list(path string, v any, maxItems int) []map[string]any {
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		c.failf(path, "not a list")
		return nil
	}
	if len(items) > maxItems {
		c.failf(path, "%d items, more than %d", len(items), maxItems)
	}
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		m, _ := it.(map[string]any)
		out = append(out, m)
	}
	return out
}

func (c *schemaCheck) str(path string, obj map[string]any, key string, minLen, maxLen int) {
	s, _ := obj[key].(string)
	if len(s) < minLen || len(s) > maxLen {
		c.failf(path+"."+key, "%d bytes, want %d to %d", len(s), minLen, maxLen)
	}
}

func (c *schemaCheck) hour(path string, h map[string]any) {
	c.count(path, h)
	for i, node := range c.list(path+".byNode", h["byNode"], schemaMaxNodes) {
		np := fmt.Sprintf("%s.byNode[%d]", path, i)
		c.count(np, node)
		c.str(np, node, "nodeName", 1, schemaMaxNodeNameBytes)
		for j, user := range c.list(np+".byUser", node["byUser"], schemaMaxUsers) {
			up := fmt.Sprintf("%s.byUser[%d]", np, j)
			c.count(up, user)
			c.str(up, user, "username", 0, schemaMaxUsernameBytes)
			c.str(up, user, "userAgent", 0, schemaMaxAgentBytes)
			for k, verb := range c.list(up+".byVerb", user["byVerb"], schemaMaxVerbs) {
				vp := fmt.Sprintf("%s.byVerb[%d]", up, k)
				c.count(vp, verb)
				if _, ok := verb["verb"].(string); !ok {
					c.failf(vp, "verb is required")
				}
				c.str(vp, verb, "verb", 0, schemaMaxVerbBytes)
			}
		}
	}
}

func (c *schemaCheck) object(obj map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	path := fmt.Sprintf("%v", meta["name"])
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		c.failf(path, "spec is required")
	}
	if n, _ := spec["numberOfUsersToReport"].(float64); n < 0 || n > schemaMaxUsersToReport {
		c.failf(path+".spec", "numberOfUsersToReport %v is not 0 to %d", n, schemaMaxUsersToReport)
	}
	status, _ := obj["status"].(map[string]any)
	c.count(path+".status", status)
	if rel, ok := status["removedInRelease"].(string); ok && (len(rel) > schemaMaxReleaseBytes || (rel != "" && !schemaRelease.MatchString(rel))) {
		c.failf(path+".status.removedInRelease", "%q does not match %s", rel, schemaRelease)
	}
	if cur, ok := status["currentHour"].(map[string]any); ok {
		c.hour(path+".status.currentHour", cur)
	}
	for i, h := range c.list(path+".status.last24h", status["last24h"], schemaMaxHours) {
		c.hour(fmt.Sprintf("%s.status.last24h[%d]", path, i), h)
	}
}

// The list and every object stay within OpenShift's schema on real captured
// traffic and on a hostile fleet: more apiservers than byNode allows,
// invented verbs, oversized names.
func TestObjectsStayWithinOpenShiftSchema(t *testing.T) {
	cfg := testConfig(t)
	// Room in the store for more apiservers than byNode holds, so that the
	// API's own cut is what is tested.
	cfg.MaxAPIServersPerCluster = 2 * schemaMaxNodes
	s := start(t, cfg)
	s.postCaptured("/audit/webhook/master-0")

	const nodes = schemaMaxNodes + 9
	for i := range nodes {
		code, _ := s.post(fmt.Sprintf("/audit/webhook/fleet-%d/apiserver-%d", i%3, i), "application/json",
			eventList(ev(fmt.Sprintf("node-%d", i))))
		require.Equal(t, 200, code)
	}
	var hostile []map[string]any
	for i := range 40 {
		hostile = append(hostile, ev(fmt.Sprintf("hostile-%d", i),
			"verb", fmt.Sprintf("made-up-verb-number-%d-%s", i, strings.Repeat("x", 40)),
			"user", map[string]any{"username": fmt.Sprintf("%d-%s", i%3, strings.Repeat("u", 2000))},
			"userAgent", strings.Repeat("a", 5000)))
	}
	code, _ := s.post("/audit/webhook/master-0", "application/json", eventList(hostile...))
	require.Equal(t, 200, code)

	for _, path := range []string{"/apis/sunset.dev/v1/apirequestcounts", "/apis/sunset.dev/v1/apirequestcounts?users=100", "/apis/sunset.dev/v1/apirequestcounts?users=0"} {
		code, body := s.get(path)
		require.Equal(t, 200, code, path)
		var list struct {
			Items []map[string]any `json:"items"`
		}
		require.NoError(t, json.Unmarshal(body, &list))
		require.Len(t, list.Items, 4, path)
		var c schemaCheck
		for _, obj := range list.Items {
			c.object(obj)
		}
		require.Empty(t, c.problems, path)
	}

	// The cut lists say what they left out, and the totals keep it.
	var ep struct {
		Status struct {
			RequestCount int64 `json:"requestCount"`
			CurrentHour  struct {
				RequestCount  int64 `json:"requestCount"`
				ByNodeOmitted int   `json:"byNodeOmitted"`
				ByNode        []struct {
					NodeName string `json:"nodeName"`
				} `json:"byNode"`
			} `json:"currentHour"`
		} `json:"status"`
	}
	_, body := s.get("/apis/sunset.dev/v1/apirequestcounts/endpoints.v1")
	require.NoError(t, json.Unmarshal(body, &ep))
	// master-0 and 521 fleet apiservers are 522, ten more than byNode holds.
	require.Equal(t, nodes+1-schemaMaxNodes, ep.Status.CurrentHour.ByNodeOmitted)
	require.Len(t, ep.Status.CurrentHour.ByNode, schemaMaxNodes)
	require.Equal(t, int64(35+nodes+40), ep.Status.CurrentHour.RequestCount, "35 captured, one per fleet node, 40 hostile")
}

// An apiserver that called an API within the retention period but not in
// the last 24 hours is still listed in every hour, with 0, as OpenShift
// lists every apiserver.
func TestApiserversOfTheRetentionAreListedIdle(t *testing.T) {
	s := start(t, testConfig(t))
	threeDaysAgo := testNow.Add(-72 * time.Hour).Format(time.RFC3339Nano)
	code, _ := s.post("/audit/webhook/old-apiserver", "application/json", eventList(ev("old", "requestReceivedTimestamp", threeDaysAgo)))
	require.Equal(t, 200, code)
	code, _ = s.post("/audit/webhook/master-0", "application/json", eventList(ev("new")))
	require.Equal(t, 200, code)

	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(1), ep.Status.RequestCount, "the old request is outside the 24 hours")
	for i, h := range ep.Status.Last24h {
		var names []string
		var counts []int64
		for _, n := range h.ByNode {
			names, counts = append(names, n.NodeName), append(counts, n.RequestCount)
		}
		require.Equal(t, []string{"master-0", "old-apiserver"}, names, "hour %d", i)
		want := []int64{0, 0}
		if i == testNow.Hour() {
			want[0] = 1
		}
		require.Equal(t, want, counts, "hour %d", i)
	}
}
