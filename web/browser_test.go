package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/testutil/golden"
)

// front is what stands between a browser and Sunset in a cluster: a proxy
// that serves it under a path prefix (as `kubectl proxy` does), that may
// demand a bearer token for reads (as an authenticating proxy does), and
// that records the API requests the page makes.
type front struct {
	url    string
	prefix string
	mu     sync.Mutex
	token  string
	calls  []string
	auths  []string
}

func newFront(t *testing.T, backend, prefix string) *front {
	t.Helper()
	target, err := url.Parse(backend)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	f := &front{prefix: prefix}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok || !strings.HasPrefix(rest, "/") {
			http.NotFound(w, r)
			return
		}
		r.URL.Path, r.URL.RawPath = rest, ""
		if strings.HasPrefix(r.URL.Path, "/apis/") {
			f.mu.Lock()
			q := r.URL.Query().Encode()
			f.calls = append(f.calls, r.URL.Path+map[bool]string{true: "?" + q}[q != ""])
			f.auths = append(f.auths, r.Header.Get("Authorization"))
			token := f.token
			f.mu.Unlock()
			if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","message":"a bearer token is required","code":401}`))
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL + prefix
	return f
}

// take returns and forgets the API requests seen, and their
// Authorization headers.
func (f *front) take() (calls, auths []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	calls, auths = f.calls, f.auths
	f.calls, f.auths = nil, nil
	return calls, auths
}

func (f *front) requireToken(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token = token
}

// artifacts is where screenshots go: $WEB_ARTIFACTS (kept after the
// test, for CI), else a temporary directory.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("WEB_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

func saveScreenshot(t *testing.T, dir, name string, png []byte) {
	t.Helper()
	require.Greater(t, len(png), 8)
	require.Equal(t, "\x89PNG\r\n\x1a\n", string(png[:8]), name)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	t.Logf("screenshot %s", filepath.Join(dir, name))
	if golden.Update() {
		// The README shows them.
		require.NoError(t, os.WriteFile(filepath.Join("..", "docs", name), png, 0o644))
	}
}

// number reads a count as the page shows it ("1,234").
func number(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), 10, 64)
	require.NoError(t, err, "%q is not a count", s)
	return n
}

// The page in a real browser, through a proxy with a path prefix: the
// numbers it shows are the API's, its charts add up to them, and it
// reports no error in its console.
func TestPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	b := startBrowser(t)
	s := startFilled(t)
	fr := newFront(t, s.url, "/api/v1/namespaces/sunset/services/sunset:8080/proxy")
	out := artifacts(t)
	page := fr.url + "/"

	// The overview of 30 days, the default window of a 720h retention.
	tb := b.newTab(1280, 900, "light", false)
	require.Equal(t, "ready", tb.open(page))
	require.Empty(t, b.errors())
	calls, auths := fr.take()
	require.ElementsMatch(t, []string{"/apis/sunset.dev/v1/serverinfo", "/apis/sunset.dev/v1/apirequestcounts?hourly=true&since=720h",
		"/apis/sunset.dev/v1/upgradechecks?since=720h"}, calls)
	require.Equal(t, []string{"", "", ""}, auths, "no token until one is asked for")

	list := apiJSON[sunsetv1.APIRequestCountList](s, "apirequestcounts", url.Values{"since": {"720h"}, "hourly": {"true"}})
	byName := map[string]sunsetv1.APIRequestCount{}
	for _, it := range list.Items {
		byName[it.Metadata.Name] = it
	}
	type row struct {
		API, Day, Window, RemovedIn, Replacement string
		Badges                                   []string
		Bars                                     int
	}
	var rows []row
	tb.mustEval(`[...document.querySelectorAll('#apis tbody tr')].map(tr => ({
		API: tr.dataset.api,
		Day: tr.querySelector('[data-count="24h"]').textContent,
		Window: tr.querySelector('[data-count="window"]').textContent,
		RemovedIn: tr.querySelector('[data-field="removedIn"]').textContent,
		Replacement: tr.querySelector('[data-field="replacement"]').textContent,
		Badges: [...tr.querySelectorAll('.badge')].map(b => b.textContent),
		Bars: tr.querySelectorAll('svg.spark rect').length,
	}))`, &rows)
	var order []string
	for _, r := range rows {
		order = append(order, r.API)
		obj := byName[r.API]
		require.Equal(t, obj.Status.RequestCount, number(t, r.Day), r.API)
		require.Equal(t, obj.Status.Window.RequestCount, number(t, r.Window), r.API)
		require.Equal(t, obj.Status.RemovedInRelease, strings.TrimPrefix(r.RemovedIn, "—"), r.API)
		if rep := obj.Status.Replacement; rep != nil {
			require.Equal(t, strings.TrimPrefix(rep.Group+"/", "/")+rep.Version+" "+rep.Kind, r.Replacement, r.API)
		} else {
			require.Equal(t, "—", r.Replacement, r.API)
		}
		// One bar per UTC day with requests (all within the last three
		// days here).
		days := map[string]bool{}
		for _, h := range obj.Status.Window.ByHour {
			days[h.Hour.Format("2006-01-02")] = true
		}
		require.NotZero(t, r.Bars, r.API)
		require.LessOrEqual(t, len(days), r.Bars, r.API)
	}
	// Most urgent first: already removed, then by removal release.
	require.Equal(t, []string{"cronjobs.v1beta1.batch", "servicecidrs.v1beta1.networking.k8s.io", "volumeattributesclasses.v1beta1.storage.k8s.io",
		"deviceclasses.v1beta1.resource.k8s.io", "mutatingadmissionpolicies.v1alpha1.admissionregistration.k8s.io",
		"leasecandidates.v1beta1.coordination.k8s.io", "resourceclaims.v1beta2.resource.k8s.io",
		"componentstatuses.v1", "endpoints.v1", "widgets.v1alpha1.e2e.example.com", "widgets.v1beta1.e2e.example.com"}, order)
	require.Equal(t, []string{"already removed: clients get 404"}, rows[0].Badges)
	require.Equal(t, []string{"gone in 1.37"}, rows[1].Badges)
	require.Equal(t, []string{"gone in 1.37"}, rows[2].Badges)
	require.Empty(t, rows[3].Badges)

	// The verdict is the API's, for the first release that breaks a client
	// not already broken.
	check := apiJSON[sunsetv1.UpgradeCheck](s, "upgradechecks/1.37", url.Values{"since": {"720h"}})
	var verdict struct {
		Target, Message, ExitCode, Command string
		Findings                           []string
	}
	tb.mustEval(`({Target: document.getElementById('target').value, Message: document.querySelector('[data-verdict]').textContent,
		ExitCode: document.getElementById('verdict').dataset.exitCode, Command: document.querySelector('#verdict [data-command]').textContent,
		Findings: [...document.querySelectorAll('#verdict [data-finding]')].map(li => li.dataset.finding + ' ' + li.querySelector('[data-requests]').textContent)})`, &verdict)
	require.Equal(t, "1.37", verdict.Target)
	require.Equal(t, check.Status.Message, verdict.Message)
	require.Equal(t, "NOT SAFE to upgrade to 1.37: 3 APIs removed in or before 1.37 were requested in the last 720h, system users excluded.", verdict.Message)
	require.Equal(t, strconv.Itoa(int(check.Status.ExitCode)), verdict.ExitCode)
	require.Equal(t, "sunset check --target-version 1.37 --since 720h", verdict.Command)
	var findings []string
	for _, f := range check.Status.Findings {
		findings = append(findings, f.Name+" "+strconv.FormatInt(f.Requests, 10)+map[bool]string{true: " request", false: " requests"}[f.Requests == 1])
	}
	require.Equal(t, findings, verdict.Findings)
	// Each finding lists its callers, each with the hour of its last call.
	var callers, shown []string
	for _, f := range check.Status.Findings {
		for _, c := range f.Callers {
			callers = append(callers, f.Name+" "+c.UserName+" — last call in the hour from "+c.LastSeen.UTC().Format("2006-01-02 15:04")+" UTC")
		}
	}
	tb.mustEval(`[...document.querySelectorAll('#verdict [data-finding]')].flatMap(li => [...li.querySelectorAll('[data-caller]')].map(c => li.dataset.finding + ' ' + c.textContent))`, &shown)
	require.NotEmpty(t, callers)
	require.Equal(t, callers, shown)
	// Without scan.interval there is no cluster scan, and nothing of one.
	require.Nil(t, check.Status.Scan)
	var scanShown bool
	tb.mustEval(`document.querySelector('#verdict-scan, [data-scan-finding], [data-scan-verdict]') !== null`, &scanShown)
	require.False(t, scanShown)
	saveScreenshot(t, out, "page-overview.png", tb.screenshot())

	// Another target, picked from the list: the API's verdict for it.
	tb.mustEval(`(() => { const s = document.getElementById('target'); s.value = '1.39'; s.dispatchEvent(new Event('change')); })()`, nil)
	require.Equal(t, "ready", tb.waitState())
	tb.mustEval(`document.querySelector('[data-verdict]').textContent`, &verdict.Message)
	require.Equal(t, apiJSON[sunsetv1.UpgradeCheck](s, "upgradechecks/1.39", url.Values{"since": {"720h"}}).Status.Message, verdict.Message)
	require.Empty(t, b.errors())

	// System traffic hidden, a week: counts without it.
	require.Equal(t, "ready", tb.open(page+"?system=hide&since=168h&cluster=default"))
	week := apiJSON[sunsetv1.APIRequestCountList](s, "apirequestcounts", url.Values{"since": {"168h"}, "cluster": {"default"}})
	rows = nil
	tb.mustEval(`[...document.querySelectorAll('#apis tbody tr')].map(tr => ({API: tr.dataset.api,
		Day: tr.querySelector('[data-count="24h"]').textContent, Window: tr.querySelector('[data-count="window"]').textContent}))`, &rows)
	require.Len(t, rows, len(week.Items))
	for i, r := range rows {
		var obj sunsetv1.APIRequestCount
		for _, it := range week.Items {
			if it.Metadata.Name == r.API {
				obj = it
			}
		}
		require.Equal(t, obj.Status.RequestCount-obj.Status.SystemRequestCount, number(t, r.Day), r.API)
		require.Equal(t, obj.Status.Window.RequestCount-obj.Status.Window.SystemRequestCount, number(t, r.Window), r.API)
		require.NotEqual(t, "cronjobs.v1beta1.batch", rows[i].API, "prod is filtered out")
	}
	require.Empty(t, b.errors())

	// Nothing in the window: said so, with the way to older requests.
	var empty string
	require.Equal(t, "ready", tb.open(page+"?cluster=nowhere"))
	tb.mustEval(`document.getElementById('empty').textContent`, &empty)
	require.Equal(t, "No deprecated API requests in the last 30 days in cluster nowhere.", empty)
	require.Equal(t, "ready", tb.open(page+"?cluster=prod&since=24h&system=hide"))
	var prodRows int
	tb.mustEval(`document.querySelectorAll('#apis tbody tr').length`, &prodRows)
	require.Equal(t, 1, prodRows, "only the CronJob client is in prod")
	require.Empty(t, b.errors())

	// One API, reached by its link.
	require.Equal(t, "ready", tb.open(page))
	fr.take()
	tb.mustEval(`document.querySelector('[data-api="endpoints.v1"] a').click()`, nil)
	require.Equal(t, "ready", tb.waitState())
	var loc string
	tb.mustEval(`location.search`, &loc)
	require.Equal(t, "?api=endpoints.v1", loc)
	obj := apiJSON[sunsetv1.APIRequestCount](s, "apirequestcounts/endpoints.v1", url.Values{"since": {"720h"}, "hourly": {"true"}, "users": {"100"}})
	var view struct {
		Stats              map[string]string
		Hours              map[string]string
		Users              [][3]string
		Warning, Command   string
		Replacement, Title string
	}
	tb.mustEval(`({
		Stats: Object.fromEntries([...document.querySelectorAll('[data-stat]')].map(e => [e.dataset.stat, e.textContent])),
		Hours: Object.fromEntries([...document.querySelectorAll('#hourly g[data-hour]')].map(g => [g.dataset.hour, g.dataset.count])),
		Users: [...document.querySelectorAll('#users tbody tr')].map(tr => [tr.dataset.user, tr.dataset.agent, tr.querySelector('[data-count="requests"]').textContent]),
		Warning: document.querySelector('[data-field="warning"]').textContent,
		Replacement: document.querySelector('[data-field="replacement"]').textContent,
		Command: document.querySelector('[data-command]').textContent,
		Title: document.getElementById('api-name').textContent,
	})`, &view)
	calls, _ = fr.take()
	require.ElementsMatch(t, []string{"/apis/sunset.dev/v1/serverinfo", "/apis/sunset.dev/v1/apirequestcounts/endpoints.v1?hourly=true&since=720h&users=100"}, calls)
	st := obj.Status
	require.Equal(t, map[string]int64{"currentHour": st.CurrentHour.RequestCount, "24h": st.RequestCount, "window": st.Window.RequestCount,
		"dryRuns": st.DryRunCount, "system": st.SystemRequestCount}, func() map[string]int64 {
		m := map[string]int64{}
		for k, v := range view.Stats {
			m[k] = number(t, v)
		}
		return m
	}())
	require.Equal(t, map[string]int64{"currentHour": 55, "24h": 55, "window": 55, "dryRuns": 2, "system": 38}, map[string]int64{
		"currentHour": st.CurrentHour.RequestCount, "24h": st.RequestCount, "window": st.Window.RequestCount, "dryRuns": st.DryRunCount, "system": st.SystemRequestCount})
	// The chart has a bar for every hour with requests, of its count.
	require.Len(t, view.Hours, len(st.Window.ByHour))
	for _, h := range st.Window.ByHour {
		require.Equal(t, strconv.FormatInt(h.RequestCount, 10), view.Hours[h.Hour.Format("2006-01-02T15:04:05.000Z")], h.Hour)
	}
	totals := clientTotals(obj, true)
	require.Len(t, view.Users, len(totals))
	for _, u := range view.Users {
		require.Equal(t, totals[[2]string{u[0], u[1]}], number(t, u[2]), u[0])
	}
	require.Equal(t, "endpoints.v1", view.Title)
	require.Equal(t, st.Warning, view.Warning)
	require.Equal(t, "discovery.k8s.io/v1 EndpointSlice", view.Replacement)
	require.Equal(t, "sunset report endpoints.v1 --exclude-system=false", view.Command)
	require.Empty(t, b.errors())

	// A day's window: 25 hours, from the hour a day ago to the current one.
	require.Equal(t, "ready", tb.open(page+"?api=endpoints.v1&since=24h"))
	day := apiJSON[sunsetv1.APIRequestCount](s, "apirequestcounts/endpoints.v1", url.Values{"since": {"24h"}, "hourly": {"true"}, "users": {"100"}})
	var chart struct {
		Hours  map[string]string
		Labels []string
	}
	tb.mustEval(`({Hours: Object.fromEntries([...document.querySelectorAll('#hourly g[data-hour]')].map(g => [g.dataset.hour, g.dataset.count])),
		Labels: [...document.querySelectorAll('#hourly > text')].map(t => t.textContent)})`, &chart)
	require.Equal(t, map[string]string{"2026-11-21T19:00:00.000Z": strconv.FormatInt(day.Status.Window.ByHour[0].RequestCount, 10)}, chart.Hours)
	require.Len(t, day.Status.Window.ByHour, 1)
	require.Equal(t, []string{"55", "0", "00:00", "06:00", "12:00", "18:00"}, chart.Labels)
	require.Empty(t, b.errors())
	saveScreenshot(t, out, "page-api.png", tb.screenshot())

	// The already-removed API: its workload, pods and nodes.
	require.Equal(t, "ready", tb.open(page+"?api=cronjobs.v1beta1.batch"))
	var workload string
	tb.mustEval(`document.querySelector('#users tbody tr td:last-child').textContent`, &workload)
	require.Equal(t, "ci/deployerCronJob deployer"+
		"deployer-29421120-q9z4m on worker-2 (2026-11-21 19:06 UTC)deployer-29421180-x7k2p on worker-1 (2026-11-21 19:05 UTC)", workload)
	require.Empty(t, b.errors())

	// One client, reached from a user's link: every API it called, its
	// own requests to each.
	require.Equal(t, "ready", tb.open(page+"?api=endpoints.v1"))
	tb.mustEval(`document.querySelector('#users tr[data-user="alice"] a').click()`, nil)
	require.Equal(t, "ready", tb.waitState())
	mine := apiJSON[sunsetv1.APIRequestCountList](s, "apirequestcounts", url.Values{"user": {"alice"}, "since": {"720h"}, "users": {"100"}})
	var client [][2]string
	tb.mustEval(`[...document.querySelectorAll('#user-apis tbody tr')].map(tr => [tr.dataset.api, tr.querySelector('[data-count="window"]').textContent])`, &client)
	require.Len(t, client, len(mine.Items))
	for _, c := range client {
		var want int64 = -1
		for _, it := range mine.Items {
			for _, u := range it.Status.Window.ByUser {
				if it.Metadata.Name == c[0] && u.UserName == "alice" {
					want = u.RequestCount
				}
			}
		}
		require.Equal(t, want, number(t, c[1]), c[0])
	}
	tb.mustEval(`document.querySelector('[data-command]').textContent`, &view.Command)
	require.Equal(t, "sunset report --user alice --since 720h -o wide", view.Command)
	require.Empty(t, b.errors())

	// A phone, in the dark: nothing wider than the screen.
	phone := b.newTab(390, 844, "dark", true)
	require.Equal(t, "ready", phone.open(page))
	var layout struct {
		Width      int
		Background string
	}
	phone.mustEval(`({Width: document.documentElement.scrollWidth, Background: getComputedStyle(document.body).backgroundColor})`, &layout)
	require.Equal(t, 390, layout.Width)
	require.Equal(t, "rgb(15, 20, 25)", layout.Background)
	require.Equal(t, "ready", phone.open(page+"?api=endpoints.v1"))
	phone.mustEval(`({Width: document.documentElement.scrollWidth, Background: getComputedStyle(document.body).backgroundColor})`, &layout)
	require.Equal(t, 390, layout.Width)
	saveScreenshot(t, out, "page-api-phone-dark.png", phone.screenshot())
	require.Empty(t, b.errors())

	// The console is really watched: what a broken page would report is
	// seen.
	phone.mustEval(`console.error('probe'); setTimeout(() => { throw new Error('thrown') }); fetch('nothing-here')`, nil)
	var seen []string
	for deadline := time.After(10 * time.Second); ; {
		if seen = append(seen, b.errors()...); len(seen) >= 3 || !b.awaitEvent(deadline) {
			break
		}
	}
	for i, e := range seen {
		seen[i], _, _ = strings.Cut(e, "\n") // the stack differs between versions
	}
	slices.Sort(seen)
	require.Len(t, seen, 3)
	require.Equal(t, []string{"console.error: probe", "exception: Uncaught Error: thrown"}, seen[:2])
	require.Regexp(t, `^log network: .*404.* `+regexp.QuoteMeta(fr.url+"/nothing-here")+`$`, seen[2])

	checkWebhooksView(t, b, out)
	checkTokenPrompt(t, b, s)
}
