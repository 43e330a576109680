package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/ingest/gke"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/golden"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/pubsubtest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

const (
	rulesFile          = "../deploy/prometheus/sunset-rules.yaml"
	rulesTests         = "../deploy/prometheus/tests/sunset-rules.test.yaml"
	prometheusRuleFile = "../deploy/kubernetes/base/prometheusrule.yaml"
	dashboardFile      = "../deploy/grafana/sunset-dashboard.json"
)

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed; .ci/run installs Debian's prometheus package")
		}
		t.Skip("promtool is not installed (apt-get install prometheus); the rule tests need it")
	}
	return p
}

func TestRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTests}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "promtool %v:\n%s", args, out)
		require.Contains(t, string(out), "SUCCESS")
	}
}

func TestNoRuleNamesAKubernetesVersion(t *testing.T) {
	version := regexp.MustCompile(`\b1\.[0-9]{1,2}\b|v1\.[0-9]+`)
	exprs := ruleExprs(t)
	for _, e := range exprs {
		require.False(t, version.MatchString(e), "a rule names a Kubernetes version: %s", e)
	}
	require.Len(t, exprs, 17)
}

// ruleExprs returns the expression of every rule in the rules file.
func ruleExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var doc struct {
		Groups []struct {
			Rules []struct{ Expr string }
		}
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	var exprs []string
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// The PrometheusRule manifest carries exactly the rules file's groups.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var rules map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	if golden.Update() {
		manifest := map[string]any{
			"apiVersion": "monitoring.coreos.com/v1",
			"kind":       "PrometheusRule",
			"metadata":   map[string]any{"name": "sunset", "labels": map[string]any{"app.kubernetes.io/name": "sunset"}},
			"spec":       map[string]any{"groups": rules["groups"]},
		}
		out, err := yaml.Marshal(manifest)
		require.NoError(t, err)
		header := "# Generated from deploy/prometheus/sunset-rules.yaml by `go test ./test -run PrometheusRule -update`; edit that file instead.\n"
		require.NoError(t, os.WriteFile(prometheusRuleFile, append([]byte(header), out...), 0o644))
	}
	raw, err = os.ReadFile(prometheusRuleFile)
	require.NoError(t, err)
	var manifest struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Spec       map[string]any `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &manifest))
	require.Equal(t, "monitoring.coreos.com/v1", manifest.APIVersion)
	require.Equal(t, "PrometheusRule", manifest.Kind)
	require.Equal(t, rules["groups"], manifest.Spec["groups"])
}

var metricNameRe = regexp.MustCompile(`\b(sunset_[a-z0-9_]+|up)\b`)

// usedMetrics returns the metric names in PromQL expressions, histogram
// series mapped to their family.
func usedMetrics(exprs []string) []string {
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricNameRe.FindAllString(e, -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				m = strings.TrimSuffix(m, suffix)
			}
			seen[m] = true
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func ruleAndDashboardExprs(t *testing.T) []string {
	t.Helper()
	exprs := ruleExprs(t)
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.Len(t, dash.Panels, 20)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// Every metric the rules and the dashboard query exists in a live scrape of
// a Sunset fed through the webhook and Kafka, with a GKE source beside and
// the upgrade gate on.
func TestEveryQueriedMetricExists(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "audit-metrics", 1)
	ps := pubsubtest.Start(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Fake.Addr)
	cfg := testserver.Config(t)
	cfg.Clusters = map[string]config.ClusterConfig{"default": {Version: "1.36"}}
	cfg.Kafka.Config = kafka.Config{Brokers: brokers, Topics: []string{topic}, GroupID: "metrics-" + topic, SessionTimeout: 2 * time.Second}
	cfg.Ingest.GKE = []gke.Config{{Cluster: "gke-prod", Subscription: ps.Subscription}}
	// The gate's counters exist from its start, for SunsetGateFailing.
	cfg.Gate.Enabled = true
	srv := testserver.Start(t, cfg, app.Options{Logger: testserver.Logger(t)})
	url := srv.URL

	now := time.Now().UTC().Format(time.RFC3339Nano)
	body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[
		{"auditID":"m1","stage":"ResponseComplete","verb":"get","user":{"username":"alice"},"objectRef":{"resource":"volumeattributesclasses","apiGroup":"storage.k8s.io","apiVersion":"v1beta1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"` + now + `","annotations":{"k8s.io/deprecated":"true","k8s.io/removed-release":"1.37"}},
		{"auditID":"m2","stage":"ResponseComplete","verb":"list","user":{"username":"bob"},"objectRef":{"resource":"cronjobs","apiGroup":"batch","apiVersion":"v1beta1"},"responseStatus":{"code":404},"requestReceivedTimestamp":"` + now + `"},
		{"auditID":"m3","stage":"ResponseComplete","verb":"create","user":{"username":"carol"},"objectRef":{"resource":"secrets","apiVersion":"v1"},"responseStatus":{"code":201},"requestReceivedTimestamp":"` + now + `","annotations":{"apiserver.latency.k8s.io/validating-webhook":"1.5s","failed-open.validating.webhook.admission.k8s.io/round_0_index_0":"vault.example.com"}},
		"not an event"]}`
	resp, err := http.Post(url+"/audit/webhook/n1", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	kafkatest.Produce(t, brokers, topic, kafkago.Compression(0),
		kafkago.Message{Value: []byte(strings.Replace(strings.Split(body, "\n")[1], `"m1"`, `"k1"`, 1))},
		kafkago.Message{Value: []byte("poison")})

	families := map[string]bool{}
	srv.Await(30*time.Second, func() bool {
		families = scrapeFamilies(t, url)
		return families["sunset_kafka_consumer_lag"]
	})
	var missing []string
	for _, m := range usedMetrics(ruleAndDashboardExprs(t)) {
		if m == "up" {
			continue // Prometheus writes it, not Sunset
		}
		if !families[m] {
			missing = append(missing, m)
		}
	}
	require.Empty(t, missing, "queried but not exported")
}

func scrapeFamilies(t *testing.T, url string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range strings.Split(metricsText(t, url), "\n") {
		var name, typ string
		if _, err := fmt.Sscanf(line, "# TYPE %s %s", &name, &typ); err == nil {
			// A family with no samples would have no TYPE line.
			out[name] = true
		}
	}
	return out
}
