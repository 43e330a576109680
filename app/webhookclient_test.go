package app_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/plugin/pkg/audit/buffered"
	"k8s.io/apiserver/plugin/pkg/audit/webhook"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// realWebhook is kube-apiserver's audit webhook backend, in batch mode,
// pointed at url through a webhook kubeconfig as an apiserver would be.
func realWebhook(t *testing.T, url string, caPEM ...[]byte) audit.Backend {
	t.Helper()
	return realWebhookWithUser(t, url, "{}", caPEM...)
}

// realWebhookWithUser is realWebhook with the kubeconfig's user stanza
// (token, client-certificate-data...).
func realWebhookWithUser(t *testing.T, url, user string, caPEM ...[]byte) audit.Backend {
	t.Helper()
	caLine := ""
	if len(caPEM) > 0 {
		caLine = "\n    certificate-authority-data: " + base64.StdEncoding.EncodeToString(caPEM[0])
	}
	kubeconfig := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: sunset
  cluster:
    server: %s%s
contexts:
- name: sunset
  context:
    cluster: sunset
    user: apiserver
current-context: sunset
users:
- name: apiserver
  user: %s
`, url, caLine, user)), 0o600))
	delegate, err := webhook.NewBackend(kubeconfig, auditv1.SchemeGroupVersion,
		wait.Backoff{Duration: 50 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}, nil)
	require.NoError(t, err)
	// kube-apiserver's defaults, except a short wait so the test is quick.
	return buffered.NewBackend(delegate, buffered.BatchConfig{
		BufferSize:     10000,
		MaxBatchSize:   400,
		MaxBatchWait:   100 * time.Millisecond,
		ThrottleEnable: true,
		ThrottleQPS:    10,
		ThrottleBurst:  15,
		AsyncDelegate:  true,
	})
}

type traffic struct {
	n                 int
	user, agent, verb string
	ref               *auditinternal.ObjectReference
	deprecated        bool
	removed           string
}

// events renders requests the way kube-apiserver audits them: a
// RequestReceived event, a ResponseStarted one for watches, and a
// ResponseComplete one that carries the deprecation annotations.
func (tr traffic) events(prefix string, at time.Time) []*auditinternal.Event {
	var out []*auditinternal.Event
	for i := 0; i < tr.n; i++ {
		id := types.UID(fmt.Sprintf("%s-%s-%s-%d", prefix, tr.user, tr.verb, i))
		ts := metav1.NewMicroTime(at.Add(time.Duration(i) * time.Millisecond))
		base := auditinternal.Event{
			Level: auditinternal.LevelMetadata, AuditID: id, Verb: tr.verb,
			RequestURI:               "/" + tr.ref.APIGroup + "/" + tr.ref.Resource,
			User:                     authnv1.UserInfo{Username: tr.user, Groups: []string{"system:authenticated"}},
			SourceIPs:                []string{"10.1.2.3"},
			UserAgent:                tr.agent,
			ObjectRef:                tr.ref,
			RequestReceivedTimestamp: ts,
			StageTimestamp:           ts,
		}
		rr := base
		rr.Stage = auditinternal.StageRequestReceived
		out = append(out, &rr)
		if tr.verb == "watch" {
			rs := base
			rs.Stage = auditinternal.StageResponseStarted
			rs.ResponseStatus = &metav1.Status{Code: 200}
			out = append(out, &rs)
		}
		rc := base
		rc.Stage = auditinternal.StageResponseComplete
		rc.ResponseStatus = &metav1.Status{Code: 200}
		rc.Annotations = map[string]string{"authorization.k8s.io/decision": "allow"}
		if tr.deprecated {
			rc.Annotations["k8s.io/deprecated"] = "true"
			if tr.removed != "" {
				rc.Annotations["k8s.io/removed-release"] = tr.removed
			}
		}
		out = append(out, &rc)
	}
	return out
}

func TestRealAuditWebhookClient(t *testing.T) {
	s := start(t, testConfig(t))
	endpoints := &auditinternal.ObjectReference{Resource: "endpoints", Namespace: "default", APIVersion: "v1"}
	flowschemas := &auditinternal.ObjectReference{Resource: "flowschemas", APIGroup: "flowcontrol.apiserver.k8s.io", APIVersion: "v1beta3"}
	pods := &auditinternal.ObjectReference{Resource: "pods", Namespace: "default", APIVersion: "v1"}
	at := time.Date(2026, 11, 21, 19, 5, 0, 0, time.UTC)

	nodeA := []traffic{
		{n: 300, user: "alice", agent: "kubectl/v1.32.4 (linux/amd64) kubernetes/abc", verb: "list", ref: endpoints, deprecated: true},
		{n: 200, user: "bob", agent: "bob-script/2.0", verb: "get", ref: flowschemas, deprecated: true, removed: "1.32"},
		{n: 100, user: "system:serviceaccount:ci:deployer", agent: "argocd/2.9", verb: "watch", ref: endpoints, deprecated: true},
		{n: 400, user: "alice", agent: "kubectl/v1.32.4", verb: "list", ref: pods},
	}
	nodeB := []traffic{
		{n: 50, user: "alice", agent: "kubectl/v1.32.4", verb: "create", ref: endpoints, deprecated: true},
	}
	sendThroughWebhook(t, realWebhook(t, s.url+"/audit/webhook/node-a"), "a", at, nodeA)
	sendThroughWebhook(t, realWebhook(t, s.url+"/audit/webhook/prod/node-b"), "b", at, nodeB)

	ep := getAPI(t, s, "endpoints.v1")
	require.Equal(t, int64(450), ep.Status.RequestCount)
	require.Equal(t, int64(450), ep.Status.CurrentHour.RequestCount)
	requireNodes(t, ep.Status.CurrentHour, `[
		{"nodeName":"node-a","cluster":"default","requestCount":400,"byUser":[
			{"username":"alice","userAgent":"kubectl/v1.32.4","requestCount":300,"byVerb":[{"verb":"list","requestCount":300}]},
			{"username":"system:serviceaccount:ci:deployer","userAgent":"argocd/2.9","requestCount":100,"byVerb":[{"verb":"watch","requestCount":100}]}]},
		{"nodeName":"node-b","cluster":"prod","requestCount":50,"byUser":[
			{"username":"alice","userAgent":"kubectl/v1.32.4","requestCount":50,"byVerb":[{"verb":"create","requestCount":50}]}]}]`)

	fs := getAPI(t, s, "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io")
	require.Equal(t, "1.32", fs.Status.RemovedInRelease)
	require.Equal(t, int64(200), fs.Status.Last24h[19].RequestCount)
	require.Equal(t, []sunsetv1.PerNodeAPIRequestLog{{NodeName: "node-a", Cluster: "default", RequestCount: 200,
		ByUser: []sunsetv1.PerUserAPIRequestCount{{UserName: "bob", UserAgent: "bob-script/2.0", RequestCount: 200,
			ByVerb: []sunsetv1.PerVerbAPIRequestCount{{Verb: "get", RequestCount: 200}}}}}}, fs.Status.Last24h[19].ByNode)
	// The source address, last seen at bob's 200th request, once.
	require.Equal(t, []sunsetv1.ClientWorkload{{Cluster: "default", UserName: "bob", UserAgent: "bob-script/2.0",
		Workload: &sunsetv1.Workload{SourceIPs: []sunsetv1.SourceIP{{IP: "10.1.2.3", LastSeen: at.Add(199 * time.Millisecond)}}}}},
		fs.Status.Workloads)

	code, _ := s.get("/apis/sunset.dev/v1/apirequestcounts/pods.v1")
	require.Equal(t, 404, code)

	// 1,050 requests: 1,050 RequestReceived and 100 ResponseStarted events
	// skipped, 400 complete but not deprecated, 650 counted.
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_ingest_events_total Audit events received, by source and what became of them (counted, duplicate, skipped_stage, not_deprecated, no_object_ref, expired, future, invalid, too_long).
# TYPE sunset_ingest_events_total counter
sunset_ingest_events_total{result="counted",source="webhook"} 650
sunset_ingest_events_total{result="duplicate",source="webhook"} 0
sunset_ingest_events_total{result="not_deprecated",source="webhook"} 400
sunset_ingest_events_total{result="skipped_stage",source="webhook"} 1150
`), "sunset_ingest_events_total"))
}

// sendThroughWebhook runs the backend, feeds it the traffic and shuts it
// down, which flushes every buffered batch.
func sendThroughWebhook(t *testing.T, b audit.Backend, prefix string, at time.Time, trs []traffic) {
	t.Helper()
	stop := make(chan struct{})
	require.NoError(t, b.Run(stop))
	for _, tr := range trs {
		for _, e := range tr.events(prefix, at) {
			require.True(t, b.ProcessEvents(e))
		}
	}
	close(stop)
	b.Shutdown()
}
