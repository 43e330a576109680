package app_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/admission"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
	"github.com/kube-sunset/sunset/internal/testutil/golden"
)

// craftedBatch is admission/testdata/crafted-events.jsonl as the webhook
// sends it: one EventList whose items carry no kind or apiVersion.
func craftedBatch(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open("../admission/testdata/crafted-events.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var items []json.RawMessage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		delete(ev, "kind")
		delete(ev, "apiVersion")
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		items = append(items, b)
	}
	require.NoError(t, sc.Err())
	b, err := json.Marshal(map[string]any{"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": items})
	require.NoError(t, err)
	return b
}

func admissionConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	cfg.Admission.Webhooks = []admission.WebhookID{{Configuration: "vault", Webhook: "vault-validator.example.com"}}
	cfg.Admission.Metrics = config.AdmissionMetrics{MaxResources: 1, MaxWebhooks: 2}
	return cfg
}

// The crafted shapes through the HTTP webhook, read back through the API
// (checked against the hand count of aggregate's test) and /metrics, with
// caps small enough to fold labels.
func TestWebhookCountsThroughTheServer(t *testing.T) {
	cfg := admissionConfig(t)
	s := start(t, cfg)
	batch := craftedBatch(t)
	// The numbers, counted independently of Sunset.
	validating := map[string]string{}
	for _, w := range cfg.Admission.Webhooks {
		validating[w.Webhook] = w.Configuration
	}
	want := auditcount.New(auditcount.Options{ValidatingConfigurations: validating})
	for range 2 {
		code, body := s.post("/audit/webhook/prod/master-0", "application/json", batch)
		require.Equal(t, http.StatusOK, code, string(body))
		want.AddList(t, "prod", "master-0", batch)
	}
	goldenBody, err := os.ReadFile("testdata/webhookcounts.golden.json")
	require.NoError(t, err)
	want.RequireWebhookCounts(t, testNow, goldenBody)

	var list sunsetv1.WebhookCountList
	code, body := s.get("/apis/sunset.dev/v1/webhookcounts")
	require.Equal(t, http.StatusOK, code, string(body))
	require.NoError(t, json.Unmarshal(body, &list))
	golden.AssertJSON(t, "testdata/webhookcounts.golden.json", body)
	want.RequireWebhookCounts(t, testNow, body)

	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	require.Equal(t, []string{"defaulter.defaults.example.com", "good.good.example.com", "istio-sidecar-injector.sidecar-injector.istio.io",
		"labeler.labels.example.com", "pod-defaults.defaults.pods.example.com", "token-audit.tokens.audit.example.com",
		"vault.vault-validator.example.com"}, names, "sorted by name; the vault webhook's configuration from admission.webhooks")
	var slowest []string
	for _, r := range list.Resources {
		slowest = append(slowest, r.Name)
	}
	require.Equal(t, []string{"secrets.v1", "configmaps.v1", "pods.v1", "deployments.v1.apps", "tokenreviews.v1.authentication.k8s.io"}, slowest)
	pods := list.Resources[2]
	require.Equal(t, sunsetv1.WebhookCounts{RequestCount: 2, CallCount: 4, MutationCount: 2, SlowRequestCount: 1,
		WebhookLatencySeconds: 1.7205, MeanWebhookLatencySeconds: 1.7205, LatencyBuckets: sunsetv1.LatencyBuckets{UpTo2s: 1}}, pods.WebhookCounts)
	require.Equal(t, []string{"critical"}, pods.Classes)

	istio := list.Items[2].Status
	require.Equal(t, istio.WebhookCounts, istio.Last24h[19].WebhookCounts, "all in the 19:00 hour")
	require.Equal(t, istio.CurrentHour, istio.Last24h[19])
	require.Equal(t, int64(2), istio.CallCount, "called again on reinvocation")
	require.Equal(t, int64(0), istio.Last24h[18].CallCount)
	require.Empty(t, istio.Last24h[18].ByResource)

	// ?class= keeps the resources of a class, and the webhooks on them.
	code, body = s.get("/apis/sunset.dev/v1/webhookcounts?class=security")
	require.Equal(t, http.StatusOK, code, string(body))
	var security sunsetv1.WebhookCountList
	require.NoError(t, json.Unmarshal(body, &security))
	names = nil
	for _, it := range security.Items {
		names = append(names, it.Metadata.Name)
	}
	require.Equal(t, []string{"token-audit.tokens.audit.example.com", "vault.vault-validator.example.com"}, names)
	require.Len(t, security.Resources, 2)
	require.Equal(t, []string{"security", "virtual"}, security.Resources[1].Classes)

	// One webhook, with a window.
	var vault sunsetv1.WebhookCount
	code, body = s.get("/apis/sunset.dev/v1/webhookcounts/vault.vault-validator.example.com?since=48h&cluster=prod")
	require.Equal(t, http.StatusOK, code, string(body))
	require.NoError(t, json.Unmarshal(body, &vault))
	require.Equal(t, sunsetv1.WebhookCountSpec{Configuration: "vault", Webhook: "vault-validator.example.com", Types: []string{"validating"}}, vault.Spec)
	require.Equal(t, "48h0m0s", vault.Status.Window.Since)
	require.Equal(t, vault.Status.WebhookCounts, vault.Status.Window.WebhookCounts)
	require.Equal(t, sunsetv1.WebhookCounts{RequestCount: 1, CallCount: 1, FailedOpenCount: 1, SlowRequestCount: 1, WebhookLatencySeconds: 10.2,
		MeanWebhookLatencySeconds: 10.2, LatencyBuckets: sunsetv1.LatencyBuckets{Over10s: 1}}, vault.Status.WebhookCounts)

	for path, want := range map[string]int{
		"/apis/sunset.dev/v1/webhookcounts/vault.vault-validator.example.com?cluster=staging": http.StatusNotFound,
		"/apis/sunset.dev/v1/webhookcounts?class=hot":                                         http.StatusBadRequest,
		"/apis/sunset.dev/v1/webhookcounts?users=3":                                           http.StatusBadRequest,
	} {
		code, body := s.get(path)
		require.Equal(t, want, code, "%s: %s", path, body)
	}
	code, _ = s.post("/apis/sunset.dev/v1/webhookcounts", "application/json", nil)
	require.Equal(t, http.StatusMethodNotAllowed, code)

	// Labels: classed resources and configured webhooks always; one other
	// resource and two other webhooks, first come (in the store's order);
	// the rest are "other".
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_admission_webhook_calls Admission webhook calls in the sliding window (metrics.window), from the audit annotations, by resource, webhook and result (mutated, unchanged, failed_open). Validating webhooks leave an annotation only when they fail open. Falls to 0 when calls stop; the series disappears after metrics.grace.
# TYPE sunset_admission_webhook_calls gauge
sunset_admission_webhook_calls{class="critical",cluster="prod",configuration="",group="",resource="pods",result="mutated",subresource="",type="mutating",version="v1",webhook="other"} 1
sunset_admission_webhook_calls{class="critical",cluster="prod",configuration="",group="",resource="pods",result="unchanged",subresource="",type="mutating",version="v1",webhook="other"} 2
sunset_admission_webhook_calls{class="critical",cluster="prod",configuration="good",group="",resource="pods",result="mutated",subresource="",type="mutating",version="v1",webhook="good.example.com"} 1
sunset_admission_webhook_calls{class="none",cluster="prod",configuration="",group="",resource="other",result="mutated",subresource="",type="mutating",version="",webhook="other"} 1
sunset_admission_webhook_calls{class="none",cluster="prod",configuration="defaulter",group="",resource="configmaps",result="failed_open",subresource="",type="mutating",version="v1",webhook="defaults.example.com"} 1
sunset_admission_webhook_calls{class="security",cluster="prod",configuration="",group="authentication.k8s.io",resource="tokenreviews",result="unchanged",subresource="",type="mutating",version="v1",webhook="other"} 1
sunset_admission_webhook_calls{class="security",cluster="prod",configuration="vault",group="",resource="secrets",result="failed_open",subresource="",type="validating",version="v1",webhook="vault-validator.example.com"} 1
`), "sunset_admission_webhook_calls"))
	// Collectors run concurrently: read the folds once the gauges above
	// were computed.
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_admission_metric_labels_folded Distinct resources (kind=resource) or webhooks (kind=webhook) beyond the admission.metrics caps, whose admission metrics are labelled "other".
# TYPE sunset_admission_metric_labels_folded gauge
sunset_admission_metric_labels_folded{kind="resource"} 1
sunset_admission_metric_labels_folded{kind="webhook"} 4
`), "sunset_admission_metric_labels_folded"))
}

// Bad admission values are reported together, each naming its key.
func TestAdmissionConfigValidation(t *testing.T) {
	cfg := testConfig(t)
	cfg.Admission.Classes.Virtual = []string{"*reviews", "Bindings"}
	cfg.Admission.Webhooks = []admission.WebhookID{{Configuration: "c"}}
	cfg.Admission.Metrics.MaxWebhooks = 0
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{
		`admission.classes.virtual: "Bindings" is not a plural resource name`,
		`admission.webhooks[0].webhook: must name a webhook`,
		`admission.metrics.max-webhooks: must be at least 1, got 0`,
	} {
		require.Contains(t, err.Error(), want)
	}
}
