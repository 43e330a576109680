package web_test

// The views TestPageInBrowser goes on to, each in a tab of its own: the
// admission webhooks and the token prompt.

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// checkWebhooksView: with webhook servers kube-apiserver flagged
// (admission/testdata/certificate-events.jsonl on cluster prod), the
// verdict lists them as `sunset check` does, and the admission webhooks
// view, reached by the overview's link, shows the API's counts.
func checkWebhooksView(t *testing.T, b *browser, out string) {
	s := startFilled(t)
	lines, err := os.ReadFile("../admission/testdata/certificate-events.jsonl")
	require.NoError(t, err)
	s.post("/audit/webhook/prod/master-0", eventList(bytes.Split(bytes.TrimSpace(lines), []byte("\n"))))
	fr := newFront(t, s.url, "/sunset")
	page := fr.url + "/"
	since := url.Values{"since": {"720h"}}

	tb := b.newTab(1280, 900, "light", false)
	require.Equal(t, "ready", tb.open(page+"?target=1.37"))
	check := apiJSON[sunsetv1.UpgradeCheck](s, "upgradechecks/1.37", since)
	var want []string
	for _, f := range check.Status.WebhookCertificates {
		want = append(want, f.Cluster+"/"+f.Host+"/"+f.Problem+" "+strconv.FormatInt(f.Requests, 10)+map[bool]string{true: " request", false: " requests"}[f.Requests == 1])
	}
	require.Len(t, want, 5)
	var verdict struct {
		Message      string
		Certificates []string
	}
	tb.mustEval(`({Message: document.querySelector('[data-verdict]').textContent,
		Certificates: [...document.querySelectorAll('#verdict-certificates li')].map(li => li.dataset.certificate + ' ' + li.querySelector('[data-requests]').textContent)})`, &verdict)
	require.Equal(t, want, verdict.Certificates)
	require.Equal(t, check.Status.Message, verdict.Message)
	require.Equal(t, "NOT SAFE to upgrade to 1.37: 3 APIs removed in or before 1.37 were requested in the last 720h, system users excluded, "+
		"and kube-apiserver 1.37 refuses the serving certificate of 5 webhook servers called in the last 720h.", verdict.Message)
	require.Empty(t, b.errors())

	fr.take()
	tb.mustEval(`[...document.querySelectorAll('main a')].find(a => a.textContent.startsWith('Admission webhooks')).click()`, nil)
	require.Equal(t, "ready", tb.waitState())
	var loc string
	tb.mustEval(`location.search`, &loc)
	require.Equal(t, "?target=1.37&view=webhooks", loc)
	calls, _ := fr.take()
	require.ElementsMatch(t, []string{"/apis/sunset.dev/v1/serverinfo", "/apis/sunset.dev/v1/webhookcounts?since=720h"}, calls)

	list := apiJSON[sunsetv1.WebhookCountList](s, "webhookcounts", since)
	var view struct {
		Certificates, Resources, Webhooks [][]string
		Command, Title                    string
	}
	tb.mustEval(`(() => {
		const rows = (id, cells) => [...document.querySelectorAll('#' + id + ' tbody tr')].map(tr => cells(tr));
		const count = (tr, k) => tr.querySelector('[data-count="' + k + '"]').textContent;
		return {
			Certificates: rows('certificates', tr => [tr.dataset.certificate, count(tr, 'requests'), tr.querySelector('[data-field="refusedIn"]').textContent]),
			Resources: rows('webhook-resources', tr => [tr.dataset.resource, count(tr, 'requests'), count(tr, 'calls'), count(tr, 'failedOpen'), count(tr, 'latency')]),
			Webhooks: rows('webhooks', tr => [tr.dataset.webhook, tr.dataset.resource, count(tr, 'requests'), count(tr, 'calls'), count(tr, 'failedOpen')]),
			Command: document.querySelector('[data-command]').textContent,
			Title: document.title,
		};
	})()`, &view)
	var certs [][]string
	for _, c := range list.Certificates {
		certs = append(certs, []string{c.Cluster + "/" + c.Host + "/" + c.Problem, strconv.FormatInt(c.RequestCount, 10), c.RefusedInRelease})
	}
	require.Equal(t, certs, view.Certificates)
	require.Equal(t, []string{"prod/legacy-injector.legacy.svc/insecure-sha1", "2", "1.33"}, view.Certificates[2])
	name := func(r sunsetv1.WebhookResourceCount) string {
		if r.Subresource != "" {
			return r.Cluster + "/" + r.Name + "/" + r.Subresource
		}
		return r.Cluster + "/" + r.Name
	}
	var resources [][]string
	for _, r := range list.Resources {
		resources = append(resources, []string{name(r), strconv.FormatInt(r.RequestCount, 10), strconv.FormatInt(r.CallCount, 10),
			strconv.FormatInt(r.FailedOpenCount, 10), (time.Duration(r.WebhookLatencySeconds * float64(time.Second))).Round(time.Millisecond).String()})
	}
	require.Equal(t, resources, view.Resources)
	// The captured slow mutator comes first: 6 requests of 1.2 s each.
	require.Equal(t, []string{"default/widgets.v1beta1.e2e.example.com", "6", "6", "0"}, view.Resources[0][:4])
	webhooks := map[string][]string{}
	for _, it := range list.Items {
		for _, r := range it.Status.Window.ByResource {
			webhooks[it.Metadata.Name+" "+name(r)] = []string{strconv.FormatInt(r.RequestCount, 10), strconv.FormatInt(r.CallCount, 10), strconv.FormatInt(r.FailedOpenCount, 10)}
		}
	}
	require.Len(t, view.Webhooks, len(webhooks))
	for _, w := range view.Webhooks {
		require.Equal(t, webhooks[w[0]+" "+w[1]], w[2:], w[0])
	}
	require.Equal(t, "sunset report webhooks --since 720h", view.Command)
	require.Equal(t, "Admission webhooks · Sunset", view.Title)
	require.Empty(t, b.errors())

	phone := b.newTab(390, 844, "dark", true)
	require.Equal(t, "ready", phone.open(page+"?view=webhooks"))
	var width int
	phone.mustEval(`document.documentElement.scrollWidth`, &width)
	require.Equal(t, 390, width)
	png := phone.screenshot()
	require.Equal(t, "\x89PNG\r\n\x1a\n", string(png[:8]))
	require.NoError(t, os.WriteFile(filepath.Join(out, "page-webhooks-phone-dark.png"), png, 0o644))
	require.Empty(t, b.errors())
}

// checkTokenPrompt: where reads need credentials, the page asks for a
// bearer token, sends it with every API call, keeps it for the tab's
// session only, and can forget it.
func checkTokenPrompt(t *testing.T, b *browser, s *server) {
	fr := newFront(t, s.url, "/sunset")
	fr.requireToken("s3cret")
	tb := b.newTab(1024, 768, "light", false)

	require.Equal(t, "auth", tb.open(fr.url+"/", "auth"))
	var reason string
	tb.mustEval(`document.getElementById('token-dialog').open && document.getElementById('token-reason').textContent`, &reason)
	require.Equal(t, "Reading this server needs credentials: a bearer token is required", reason)
	calls, auths := fr.take()
	require.Equal(t, []string{"/apis/sunset.dev/v1/serverinfo"}, calls)
	require.Equal(t, []string{""}, auths)

	// Escape: no token, the reason, and a way back to the prompt.
	tb.press(kb.Escape)
	require.Equal(t, "error", tb.waitState("error"))
	var shown string
	tb.mustEval(`document.getElementById('error').textContent`, &shown)
	require.Equal(t, "Sunset answered 401: a bearer token is required Enter a token", shown)
	tb.mustEval(`document.querySelector('#error button').click()`, nil)
	require.Equal(t, "auth", tb.waitState("auth"))
	fr.take()

	tb.mustEval(`(() => { document.getElementById('token-input').value = 's3cret'; document.getElementById('token-form').requestSubmit(); })()`, nil)
	require.Equal(t, "ready", tb.waitState())
	calls, auths = fr.take()
	require.ElementsMatch(t, []string{"/apis/sunset.dev/v1/serverinfo", "/apis/sunset.dev/v1/apirequestcounts?hourly=true&since=720h",
		"/apis/sunset.dev/v1/upgradechecks?since=720h"}, calls, "serverinfo again, then the overview's reads")
	require.Equal(t, []string{"Bearer s3cret", "Bearer s3cret", "Bearer s3cret"}, auths)
	var kept struct {
		Session, Local string
		Rows           int
	}
	tb.mustEval(`({Session: sessionStorage.getItem('sunset.token'), Local: String(localStorage.length), Rows: document.querySelectorAll('#apis tbody tr').length})`, &kept)
	require.Equal(t, "s3cret", kept.Session)
	require.Equal(t, "0", kept.Local, "nothing outlives the session")
	require.Equal(t, 11, kept.Rows)
	// A refused fetch is the page's business: Chromium logs the two
	// refused reads of serverinfo (on opening, and after "Enter a token"),
	// and the page adds no console error or exception of its own.
	refused := "log network: Failed to load resource: the server responded with a status of 401 (Unauthorized) " + fr.url + "/apis/sunset.dev/v1/serverinfo"
	require.Equal(t, []string{refused, refused}, b.errors())

	// Forgetting it asks again.
	tb.mustEval(`document.getElementById('forget-token').click()`, nil)
	require.Equal(t, "auth", tb.waitState("auth"))
	var after string
	tb.mustEval(`String(sessionStorage.getItem('sunset.token'))`, &after)
	require.Equal(t, "null", after)
}
