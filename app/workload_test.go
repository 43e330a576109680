package app_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// podToken is user info as kube-apiserver audits a pod-bound service
// account token (a projected token, 1.30+ with node info).
func podToken(ns, sa, pod, node string) map[string]any {
	return map[string]any{
		"username": "system:serviceaccount:" + ns + ":" + sa,
		"uid":      "2d0f2b6e-6a4b-4f1e-9b5a-0c4d2a6f8e11",
		"groups":   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		"extra": map[string]any{
			"authentication.kubernetes.io/credential-id": []string{"JTI=7c1a0e6b-3f2d-4a8e-9c1b-5d6e7f8a9b0c"},
			"authentication.kubernetes.io/node-name":     []string{node},
			"authentication.kubernetes.io/node-uid":      []string{"a1b2c3d4-0000-4000-8000-000000000001"},
			"authentication.kubernetes.io/pod-name":      []string{pod},
			"authentication.kubernetes.io/pod-uid":       []string{"f0e1d2c3-0000-4000-8000-000000000002"},
		},
	}
}

func TestWorkloadAttribution(t *testing.T) {
	s := start(t, testConfig(t))
	var items []map[string]any
	// 12 pods of one Deployment over 12 minutes: the newest 10 are kept.
	for i := 0; i < 12; i++ {
		pod := fmt.Sprintf("legacy-sync-7d9f8b6c5-pod%02d", i)
		items = append(items, ev(fmt.Sprintf("dep-%d", i), "user", podToken("apps", "legacy-sync", pod, fmt.Sprintf("worker-%d", i%3)),
			"requestReceivedTimestamp", time.Date(2026, 11, 21, 19, i, 0, 0, time.UTC).Format(time.RFC3339Nano), "sourceIPs", []string{fmt.Sprintf("10.244.%d.7", i)}))
	}
	// A legacy (secret-based) token: namespace and account, no pods.
	items = append(items, ev("legacy-1", "user", map[string]any{"username": "system:serviceaccount:ci:deployer", "groups": []string{"system:serviceaccounts"}}, "sourceIPs", []string{"192.0.2.10"}))
	// A person: just the address.
	items = append(items, ev("person-1", "user", map[string]any{"username": "alice"}, "sourceIPs", []string{"198.51.100.4", "10.0.0.1"}))
	code, _ := s.post("/audit/webhook/master-0", "application/json", eventList(items...))
	require.Equal(t, 200, code)

	// Every request is in the 19:00 hour on master-0; the user agent is
	// kept up to its first space.
	const agent = "kubectl/v1.32.4"
	obj := getAPI(t, s, "endpoints.v1")
	list := func(n int64) []sunsetv1.PerVerbAPIRequestCount {
		return []sunsetv1.PerVerbAPIRequestCount{{Verb: "list", RequestCount: n}}
	}
	require.Equal(t, []sunsetv1.PerNodeAPIRequestLog{{NodeName: "master-0", Cluster: "default", RequestCount: 14, ByUser: []sunsetv1.PerUserAPIRequestCount{
		{UserName: "system:serviceaccount:apps:legacy-sync", UserAgent: agent, RequestCount: 12, ByVerb: list(12)},
		{UserName: "alice", UserAgent: agent, RequestCount: 1, ByVerb: list(1)},
		{UserName: "system:serviceaccount:ci:deployer", UserAgent: agent, RequestCount: 1, ByVerb: list(1)},
	}}}, obj.Status.CurrentHour.ByNode)

	// The newest 10 pods and addresses, newest first: pod11 down to
	// pod02, the two oldest dropped.
	var pods []sunsetv1.WorkloadPod
	var ips []sunsetv1.SourceIP
	for i := 11; i >= 2; i-- {
		at := time.Date(2026, 11, 21, 19, i, 0, 0, time.UTC)
		pods = append(pods, sunsetv1.WorkloadPod{Name: fmt.Sprintf("legacy-sync-7d9f8b6c5-pod%02d", i), Node: fmt.Sprintf("worker-%d", i%3), LastSeen: at})
		ips = append(ips, sunsetv1.SourceIP{IP: fmt.Sprintf("10.244.%d.7", i), LastSeen: at})
	}
	defaultAt := time.Date(2026, 11, 21, 19, 10, 0, 1000, time.UTC) // ev's requestReceivedTimestamp
	require.Equal(t, []sunsetv1.ClientWorkload{
		// The address the apiserver saw, last in sourceIPs, first: a
		// caller can forge the forwarded ones before it.
		{Cluster: "default", UserName: "alice", UserAgent: agent, Workload: &sunsetv1.Workload{SourceIPs: []sunsetv1.SourceIP{
			{IP: "10.0.0.1", LastSeen: defaultAt}, {IP: "198.51.100.4", LastSeen: defaultAt}}}},
		{Cluster: "default", UserName: "system:serviceaccount:apps:legacy-sync", UserAgent: agent, Workload: &sunsetv1.Workload{
			Namespace: "apps", ServiceAccount: "legacy-sync",
			// pod11 is not a generated suffix: the heuristic keeps the pod.
			Owner: &sunsetv1.Owner{Kind: "Pod", Name: "legacy-sync-7d9f8b6c5-pod11"},
			Pods:  pods, SourceIPs: ips}},
		{Cluster: "default", UserName: "system:serviceaccount:ci:deployer", UserAgent: agent, Workload: &sunsetv1.Workload{
			Namespace: "ci", ServiceAccount: "deployer", SourceIPs: []sunsetv1.SourceIP{{IP: "192.0.2.10", LastSeen: defaultAt}}}},
	}, obj.Status.Workloads, "one entry per client, sorted by username")
	require.Len(t, workloadsOf(t, obj), 3, "each listed in some byUser, once")

	// A real generated name is recognised; the record survives a restart.
	newAt := time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)
	code, _ = s.post("/audit/webhook/master-0", "application/json", eventList(
		ev("dep-new", "user", podToken("apps", "legacy-sync", "legacy-sync-7d9f8b6c5-x2kqz", "worker-9"), "requestReceivedTimestamp", newAt.Format(time.RFC3339))))
	require.Equal(t, 200, code)
	s = s.restart()
	obj = getAPI(t, s, "endpoints.v1")
	require.Equal(t, sunsetv1.PerUserAPIRequestCount{UserName: "system:serviceaccount:apps:legacy-sync", UserAgent: agent, RequestCount: 13, ByVerb: list(13)},
		obj.Status.CurrentHour.ByNode[0].ByUser[0])
	// The new pod and its address (ev's 10.0.0.7) first; pod02 is
	// dropped in its turn.
	pods = append([]sunsetv1.WorkloadPod{{Name: "legacy-sync-7d9f8b6c5-x2kqz", Node: "worker-9", LastSeen: newAt}}, pods[:9]...)
	ips = append([]sunsetv1.SourceIP{{IP: "10.0.0.7", LastSeen: newAt}}, ips[:9]...)
	require.Equal(t, &sunsetv1.Workload{Namespace: "apps", ServiceAccount: "legacy-sync", Owner: &sunsetv1.Owner{Kind: "Deployment", Name: "legacy-sync"},
		Pods: pods, SourceIPs: ips}, workloadsOf(t, obj)["system:serviceaccount:apps:legacy-sync"].Workload)
}

// workloadsOf indexes status.workloads by username, checking that each
// client is listed once and only if byUser lists it.
func workloadsOf(t *testing.T, obj sunsetv1.APIRequestCount) map[string]sunsetv1.ClientWorkload {
	t.Helper()
	listed := map[[3]string]bool{}
	for _, h := range obj.Status.Last24h {
		for _, n := range h.ByNode {
			for _, u := range n.ByUser {
				listed[[3]string{n.Cluster, u.UserName, u.UserAgent}] = true
			}
		}
	}
	out := map[string]sunsetv1.ClientWorkload{}
	seen := map[[3]string]bool{}
	for _, cw := range obj.Status.Workloads {
		key := [3]string{cw.Cluster, cw.UserName, cw.UserAgent}
		require.False(t, seen[key], "%v is listed twice", key)
		require.True(t, listed[key], "%v is not in any byUser", key)
		seen[key] = true
		out[cw.UserName] = cw
	}
	return out
}

// A request made with impersonation (kubectl --as) counts under the user
// it was made as, with that user's pod-bound token claims, as OpenShift
// counts it; the real callers are kept beside it, bounded.
func TestImpersonatedRequestsCountAsTheImpersonatedUser(t *testing.T) {
	s := start(t, testConfig(t))
	const legacy = "system:serviceaccount:apps:legacy"
	var items []map[string]any
	want := map[string]int64{}
	var callers []string
	for i := range aggregate.MaxImpersonators + 2 {
		caller := fmt.Sprintf("admin-%02d", i)
		callers = append(callers, caller)
		items = append(items, ev(fmt.Sprintf("imp-%d", i),
			"user", map[string]any{"username": caller, "groups": []string{"system:masters"}},
			"impersonatedUser", podToken("apps", "legacy", "legacy-7d9f8b6c5-x2kqz", "worker-1"),
			"requestReceivedTimestamp", time.Date(2026, 11, 21, 19, i, 0, 0, time.UTC).Format(time.RFC3339Nano)))
		want[legacy]++
	}
	items = append(items,
		ev("imp-system", "user", map[string]any{"username": "alice"}, "impersonatedUser", map[string]any{"username": "system:kube-scheduler"}),
		ev("own", "user", map[string]any{"username": "alice"}))
	want["system:kube-scheduler"]++
	want["alice"]++
	code, _ := s.post("/audit/webhook/master-0", "application/json", eventList(items...))
	require.Equal(t, 200, code)

	obj := getAPI(t, s, "endpoints.v1")
	got := map[string]sunsetv1.PerUserAPIRequestCount{}
	for _, u := range obj.Status.CurrentHour.ByNode[0].ByUser {
		got[u.UserName] = u
	}
	require.Len(t, got, len(want))
	for user, n := range want {
		require.Equal(t, n, got[user].RequestCount, user)
	}
	workloads := workloadsOf(t, obj)
	imp := workloads[legacy].ImpersonatedBy
	require.Len(t, imp, aggregate.MaxImpersonators, "the callers are capped")
	require.Equal(t, sunsetv1.Impersonator{UserName: callers[len(callers)-1], LastSeen: time.Date(2026, 11, 21, 19, len(callers)-1, 0, 0, time.UTC)}, imp[0], "newest first")
	require.Equal(t, callers[2], imp[len(imp)-1].UserName, "the two oldest callers were dropped")
	require.Equal(t, []sunsetv1.WorkloadPod{{Name: "legacy-7d9f8b6c5-x2kqz", Node: "worker-1", LastSeen: time.Date(2026, 11, 21, 19, len(callers)-1, 0, 0, time.UTC)}},
		workloads[legacy].Workload.Pods, "the impersonated user's pod-bound claims")

	require.True(t, got["system:kube-scheduler"].System, "system classification follows the impersonated user")
	require.Equal(t, []sunsetv1.Impersonator{{UserName: "alice", LastSeen: time.Date(2026, 11, 21, 19, 10, 0, 1000, time.UTC)}}, workloads["system:kube-scheduler"].ImpersonatedBy)
	require.Equal(t, want["system:kube-scheduler"], obj.Status.SystemRequestCount)
	require.Empty(t, workloads["alice"].ImpersonatedBy)

	// The ?user= filter follows the impersonated user too.
	for user, apis := range map[string]int{legacy: 1, "admin-03": 0} {
		code, body := s.get("/apis/sunset.dev/v1/apirequestcounts?user=" + user)
		require.Equal(t, 200, code)
		var list sunsetv1.APIRequestCountList
		require.NoError(t, json.Unmarshal(body, &list))
		require.Len(t, list.Items, apis, user)
	}
}
