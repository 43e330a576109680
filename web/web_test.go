package web_test

import (
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// Each view of the page is served, and the API answers it reads agree.
func TestPages(t *testing.T) {
	s := startFilled(t)
	checkServed(t, s)
	checkDataAgrees(t, s)
}

// checkServed: every view is the same page, whatever its query: the
// overview (/), one API (?api=), one client (?user=), with filters
// (?cluster=, ?since=, ?system=hide, ?target=). The script draws each from
// the API.
func checkServed(t *testing.T, s *server) {
	index, err := os.ReadFile("assets/index.html")
	require.NoError(t, err)
	for _, page := range []string{"/", "/?api=endpoints.v1", "/?user=alice", "/?cluster=prod&since=168h&system=hide&target=1.38"} {
		code, hdr, body := s.get(page)
		require.Equal(t, http.StatusOK, code, page)
		require.Equal(t, "text/html; charset=utf-8", hdr.Get("Content-Type"), page)
		require.Equal(t, "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
			hdr.Get("Content-Security-Policy"), page)
		require.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"))
		require.Equal(t, "no-cache", hdr.Get("Cache-Control"))
		require.Equal(t, string(index), string(body), page)
	}

	// What the page links to is served, by a relative URL (so the page
	// works under a proxy's path prefix), with its type; unchanged files
	// cost a 304.
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(string(index), -1)
	want := map[string]string{
		"assets/favicon.svg":                  "image/svg+xml",
		"assets/app.css":                      "text/css; charset=utf-8",
		"assets/app.js":                       "text/javascript; charset=utf-8",
		"./":                                  "text/html; charset=utf-8",
		"apis/sunset.dev/v1/apirequestcounts": "application/json",
	}
	seen := map[string]bool{}
	for _, m := range refs {
		ref := m[1]
		typ, ok := want[ref]
		require.True(t, ok, "index.html refers to %q", ref)
		seen[ref] = true
		code, hdr, body := s.get("/" + strings.TrimPrefix(ref, "./"))
		require.Equal(t, http.StatusOK, code, ref)
		require.Equal(t, typ, hdr.Get("Content-Type"), ref)
		if strings.HasPrefix(ref, "assets/") {
			onDisk, err := os.ReadFile(ref)
			require.NoError(t, err)
			require.Equal(t, string(onDisk), string(body), ref)
			req, err := http.NewRequest(http.MethodGet, s.url+"/"+ref, nil)
			require.NoError(t, err)
			req.Header.Set("If-None-Match", hdr.Get("ETag"))
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusNotModified, resp.StatusCode, ref)
		}
	}
	require.Len(t, seen, len(want))

	for path, code := range map[string]int{"/index.html": 404, "/assets/": 404, "/assets/nothing.js": 404, "/apis/sunset.dev/v1/nothing": 404, "/favicon.ico": 404} {
		got, _, _ := s.get(path)
		require.Equal(t, code, got, path)
	}
	resp, err := http.Post(s.url+"/", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
}

// Nothing is fetched from elsewhere: no CDN, no font service. The only
// absolute URL in the assets is the SVG namespace, and the script reads
// the API by a relative path.
func TestAssetsAreSelfContained(t *testing.T) {
	abs := regexp.MustCompile(`(?i)\b(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	entries, err := os.ReadDir("assets")
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile("assets/" + e.Name())
		require.NoError(t, err)
		for _, m := range abs.FindAllString(string(b), -1) {
			require.Equal(t, "http://www.w3.org", m, e.Name())
		}
	}
	js, err := os.ReadFile("assets/app.js")
	require.NoError(t, err)
	require.Contains(t, string(js), "const API = 'apis/sunset.dev/v1/';")
	require.NotContains(t, string(js), "innerHTML", "API data goes into the page as text only")
}

// checkDataAgrees: the API answers each view reads agree with each other:
// the overview's list and verdicts, one API's hours and clients, one
// client's APIs.
func checkDataAgrees(t *testing.T, s *server) {
	since := url.Values{"since": {"720h"}}

	// Overview: apirequestcounts?since=720h&hourly=true and upgradechecks?since=720h.
	list := apiJSON[sunsetv1.APIRequestCountList](s, "apirequestcounts", url.Values{"since": {"720h"}, "hourly": {"true"}})
	checks := apiJSON[sunsetv1.UpgradeCheckList](s, "upgradechecks", since)
	var names []string
	windowCounts := map[string]int64{}
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
		var sum int64
		for _, h := range it.Status.Window.ByHour {
			sum += h.RequestCount
		}
		require.Equal(t, it.Status.Window.RequestCount, sum, it.Metadata.Name)
		windowCounts[it.Metadata.Name] = it.Status.Window.RequestCount - it.Status.Window.SystemRequestCount
	}
	require.Equal(t, []string{"componentstatuses.v1", "cronjobs.v1beta1.batch", "deviceclasses.v1beta1.resource.k8s.io", "endpoints.v1",
		"leasecandidates.v1beta1.coordination.k8s.io", "mutatingadmissionpolicies.v1alpha1.admissionregistration.k8s.io",
		"resourceclaims.v1beta2.resource.k8s.io", "servicecidrs.v1beta1.networking.k8s.io", "volumeattributesclasses.v1beta1.storage.k8s.io",
		"widgets.v1alpha1.e2e.example.com", "widgets.v1beta1.e2e.example.com"}, names)
	require.Len(t, checks.Items, 20)
	for _, c := range checks.Items {
		require.Len(t, c.Status.Findings, len(names), c.Metadata.Name)
		for _, f := range c.Status.Findings {
			require.Equal(t, windowCounts[f.Name], f.Requests, "%s %s", c.Metadata.Name, f.Name)
		}
	}
	require.Equal(t, map[string]int64{"componentstatuses.v1": 3, "cronjobs.v1beta1.batch": 4, "deviceclasses.v1beta1.resource.k8s.io": 1,
		"endpoints.v1": 17, "leasecandidates.v1beta1.coordination.k8s.io": 1, "mutatingadmissionpolicies.v1alpha1.admissionregistration.k8s.io": 1,
		"resourceclaims.v1beta2.resource.k8s.io": 1, "servicecidrs.v1beta1.networking.k8s.io": 1, "volumeattributesclasses.v1beta1.storage.k8s.io": 4,
		"widgets.v1alpha1.e2e.example.com": 2, "widgets.v1beta1.e2e.example.com": 75}, windowCounts)

	// One API: apirequestcounts/endpoints.v1?since=720h&hourly=true&users=100.
	obj := apiJSON[sunsetv1.APIRequestCount](s, "apirequestcounts/endpoints.v1", url.Values{"since": {"720h"}, "hourly": {"true"}, "users": {"100"}})
	var clients int64
	for _, n := range clientTotals(obj, true) {
		clients += n
	}
	require.Equal(t, obj.Status.RequestCount, clients, "users=100 lists every client")
	require.Equal(t, map[[2]string]int64{{"system:apiserver", "kube-apiserver/v1.36.3"}: 38, {"alice", "kubectl/v1.32.4"}: 14,
		{"bob", "bob-script/2.0"}: 2, {"admin", "find-deprecated/1.0"}: 1}, clientTotals(obj, true))

	// One client: apirequestcounts?user=alice&since=720h&users=100 lists
	// the APIs whose window names alice.
	mine := apiJSON[sunsetv1.APIRequestCountList](s, "apirequestcounts", url.Values{"user": {"alice"}, "since": {"720h"}, "users": {"100"}})
	all := apiJSON[sunsetv1.APIRequestCountList](s, "apirequestcounts", url.Values{"since": {"720h"}, "users": {"100"}})
	var withAlice, got []string
	for _, it := range all.Items {
		if slices.ContainsFunc(it.Status.Window.ByUser, func(u sunsetv1.WindowUser) bool { return u.UserName == "alice" }) {
			withAlice = append(withAlice, it.Metadata.Name)
		}
	}
	for _, it := range mine.Items {
		got = append(got, it.Metadata.Name)
	}
	require.Equal(t, withAlice, got)
	require.Equal(t, []string{"endpoints.v1", "mutatingadmissionpolicies.v1alpha1.admissionregistration.k8s.io",
		"volumeattributesclasses.v1beta1.storage.k8s.io", "widgets.v1beta1.e2e.example.com"}, got)
}
