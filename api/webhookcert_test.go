package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/cli"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
	"github.com/kube-sunset/sunset/verdict"
)

// startWithCertificates runs Sunset with admission/testdata/
// certificate-events.jsonl posted by cluster prod's apiserver.
func startWithCertificates(t *testing.T) string {
	t.Helper()
	s := testserver.Start(t, testserver.Config(t), app.Options{Logger: testserver.Logger(t), Now: func() time.Time { return ingesttest.CapturedNow }})
	lines, err := os.ReadFile("../admission/testdata/certificate-events.jsonl")
	require.NoError(t, err)
	body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` +
		strings.Join(strings.Split(strings.TrimSpace(string(lines)), "\n"), ",") + `]}`
	resp, err := http.Post(s.URL+"/audit/webhook/prod/master-0", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return s.URL
}

func getJSON[T any](t *testing.T, url string) T {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var out T
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// The servers kube-apiserver flagged are listed with what each release
// does about them, counted as the crafted events say (see their README).
func TestWebhookCertificatesAreListed(t *testing.T) {
	base := startWithCertificates(t)
	url := base + "/apis/sunset.dev/v1/"
	hour := time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)
	const sha1, san = "uses an insecure SHA-1 signature", "relies on a legacy Common Name field instead of the SAN extension for subject validation"
	cert := func(host, problem string, requests int64, byRes ...sunsetv1.WebhookCertificateResource) sunsetv1.WebhookCertificate {
		c := sunsetv1.WebhookCertificate{Cluster: "prod", Host: host, Problem: problem, RequestCount: requests, LastSeen: hour, ByResource: byRes}
		if problem == "insecure-sha1" {
			c.Reason, c.RefusedByDefaultInRelease, c.GODEBUG, c.RefusedInRelease = sha1, "1.24", "x509sha1=1", "1.33"
		} else {
			c.Reason, c.RefusedByDefaultInRelease, c.GODEBUG, c.RefusedInRelease = san, "1.19", "x509ignoreCN=0", "1.23"
		}
		return c
	}
	res := func(name string, n int64) sunsetv1.WebhookCertificateResource {
		return sunsetv1.WebhookCertificateResource{Name: name, RequestCount: n}
	}
	list := getJSON[sunsetv1.WebhookCountList](t, url+"webhookcounts")
	require.Equal(t, []sunsetv1.WebhookCertificate{
		// Refused since 1.23 first, then since 1.33; most requests first.
		cert("ok.example.com", "missing-san", 1, res("secrets.v1", 1)),
		cert("policy.example.com", "missing-san", 1, res("configmaps.v1", 1)),
		cert("legacy-injector.legacy.svc", "insecure-sha1", 2, res("pods.v1", 2)),
		cert("10.96.0.15", "insecure-sha1", 1, res("pods.v1", 1)),
		cert("widget-validator.widgets.svc", "insecure-sha1", 1, res("widgets.v1beta1.e2e.example.com", 1)),
	}, list.Certificates)
	// The servers are not webhooks.
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	require.Equal(t, []string{"labels.labels.example.com", "legacy-injector.inject.legacy.example.com", "validate.widgets.example.com"}, names)

	// ?class= and ?cluster= apply to them as to resources.
	security := getJSON[sunsetv1.WebhookCountList](t, url+"webhookcounts?class=security&since=48h")
	require.Equal(t, []sunsetv1.WebhookCertificate{cert("ok.example.com", "missing-san", 1, res("secrets.v1", 1))}, security.Certificates)
	require.Empty(t, getJSON[sunsetv1.WebhookCountList](t, url+"webhookcounts?cluster=default").Certificates)

	// The metrics: the counter behind the alert; the servers are not
	// webhooks there either.
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metrics), `sunset_admission_webhook_certificate_problems_total{cluster="prod",problem="insecure-sha1"} 4`+"\n")
	require.Contains(t, string(metrics), `sunset_admission_webhook_certificate_problems_total{cluster="prod",problem="missing-san"} 2`+"\n")
	require.Contains(t, string(metrics), `sunset_admission_webhook_calls{`)
	require.NotContains(t, string(metrics), `type="insecure-sha1"`)
	require.NotContains(t, string(metrics), `type="missing-san"`)

	// The upgrade gate: refused from 1.23 (no SAN) and 1.33 (SHA-1),
	// whatever the settings; before that, a warning.
	check := getJSON[sunsetv1.UpgradeCheck](t, url+"upgradechecks/1.37")
	require.Equal(t, sunsetv1.ExitCodeRemoved, check.Status.ExitCode)
	require.Equal(t, "NOT SAFE to upgrade to 1.37: kube-apiserver 1.37 refuses the serving certificate of 5 webhook servers called in the last 24h.", check.Status.Message)
	require.Len(t, check.Status.WebhookCertificates, 5)
	require.Equal(t, sunsetv1.CertificateFinding{Cluster: "prod", Host: "legacy-injector.legacy.svc", Problem: "insecure-sha1", Severity: sunsetv1.SeverityRefused,
		RefusedIn: "1.33", Requests: 2, Resources: []string{"pods.v1"},
		Warning: "the serving certificate of webhook server legacy-injector.legacy.svc uses an insecure SHA-1 signature: " +
			"kube-apiserver refuses it by default in v1.24+ (GODEBUG=x509sha1=1 lets it through) and always in v1.33+"}, check.Status.WebhookCertificates[2])

	check = getJSON[sunsetv1.UpgradeCheck](t, url+"upgradechecks/1.30")
	require.Equal(t, sunsetv1.ExitCodeRemoved, check.Status.ExitCode)
	require.Equal(t, "NOT SAFE to upgrade to 1.30: kube-apiserver 1.30 refuses the serving certificate of 2 webhook servers called in the last 24h.", check.Status.Message)
	var severities []string
	for _, f := range check.Status.WebhookCertificates {
		severities = append(severities, f.Host+" "+f.Severity)
	}
	require.Equal(t, []string{"ok.example.com refused", "policy.example.com refused", "legacy-injector.legacy.svc deprecated",
		"10.96.0.15 deprecated", "widget-validator.widgets.svc deprecated"}, severities)

	check = getJSON[sunsetv1.UpgradeCheck](t, url+"upgradechecks/1.22?warningsAsErrors=true")
	require.Equal(t, sunsetv1.ExitCodeDeprecated, check.Status.ExitCode)
	require.Equal(t, "FAILED (--warnings-as-errors): no API removed in or before 1.22 was requested in the last 24h, system users excluded, "+
		"but 1 deprecated API was; kube-apiserver releases after 1.22 refuse the serving certificate of 5 webhook servers called in the last 24h.", check.Status.Message)
	check = getJSON[sunsetv1.UpgradeCheck](t, url+"upgradechecks/1.22")
	require.Equal(t, sunsetv1.ExitCodeSafe, check.Status.ExitCode)

	// The releases where the verdict changes include those.
	checks := getJSON[sunsetv1.UpgradeCheckList](t, url+"upgradechecks")
	var releases []string
	for _, it := range checks.Items {
		releases = append(releases, it.Metadata.Name)
	}
	for _, r := range []string{"1.19", "1.23", "1.24", "1.33"} {
		require.Contains(t, releases, r)
	}

	// `sunset check`'s text: a warning line per server, refused ones
	// marked, before the verdict.
	var out bytes.Buffer
	check = getJSON[sunsetv1.UpgradeCheck](t, url+"upgradechecks/1.30")
	require.NoError(t, cli.CheckResult{CheckResult: check.Status}.WriteText(&out))
	require.Equal(t, `Warning: e2e.example.com/v1beta1 widgets is deprecated (1 request in 24h by 1 client: carol)
Warning: the serving certificate of webhook server ok.example.com relies on a legacy Common Name field instead of the SAN extension for subject validation: kube-apiserver refuses it by default in v1.19+ (GODEBUG=x509ignoreCN=0 lets it through) and always in v1.23+ (1 request in 24h in cluster prod on secrets.v1) [refused by 1.30]
Warning: the serving certificate of webhook server policy.example.com relies on a legacy Common Name field instead of the SAN extension for subject validation: kube-apiserver refuses it by default in v1.19+ (GODEBUG=x509ignoreCN=0 lets it through) and always in v1.23+ (1 request in 24h in cluster prod on configmaps.v1) [refused by 1.30]
Warning: the serving certificate of webhook server legacy-injector.legacy.svc uses an insecure SHA-1 signature: kube-apiserver refuses it by default in v1.24+ (GODEBUG=x509sha1=1 lets it through) and always in v1.33+ (2 requests in 24h in cluster prod on pods.v1)
Warning: the serving certificate of webhook server 10.96.0.15 uses an insecure SHA-1 signature: kube-apiserver refuses it by default in v1.24+ (GODEBUG=x509sha1=1 lets it through) and always in v1.33+ (1 request in 24h in cluster prod on pods.v1)
Warning: the serving certificate of webhook server widget-validator.widgets.svc uses an insecure SHA-1 signature: kube-apiserver refuses it by default in v1.24+ (GODEBUG=x509sha1=1 lets it through) and always in v1.33+ (1 request in 24h in cluster prod on widgets.v1beta1.e2e.example.com)
NOT SAFE to upgrade to 1.30: kube-apiserver 1.30 refuses the serving certificate of 2 webhook servers called in the last 24h.
`, out.String())
}

// Without flagged servers the verdict and its JSON are as before: no
// webhookCertificates field.
func TestCheckWithoutCertificatesIsUnchanged(t *testing.T) {
	res := verdict.Check(sunsetv1.APIRequestCountList{}, verdict.CheckOptions{Target: catalog.Release{Major: 1, Minor: 37}, Since: 24 * time.Hour, ExcludeSystem: true})
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.NotContains(t, string(b), "webhookCertificates")
	require.Equal(t, "Safe to upgrade to 1.37: no deprecated API was requested in the last 24h, system users excluded.", res.Message)
}
