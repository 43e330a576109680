package app_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/store"
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

	obj := getAPI(t, s, "endpoints.v1")
	require.Len(t, obj.Status.CurrentHour.ByNode[0].ByUser, 3)
	byUser := map[string]*api.Workload{}
	for _, cw := range workloadsOf(t, obj) {
		byUser[cw.UserName] = cw.Workload
	}
	require.Len(t, byUser, 3, "one workload per client")
	dep := byUser["system:serviceaccount:apps:legacy-sync"]
	require.NotNil(t, dep)
	require.Equal(t, "apps", dep.Namespace)
	require.Equal(t, "legacy-sync", dep.ServiceAccount)
	require.Equal(t, &api.Owner{Kind: "Pod", Name: "legacy-sync-7d9f8b6c5-pod11"}, dep.Owner, "pod11 is not a generated suffix: the heuristic keeps the pod")
	require.Len(t, dep.Pods, 10)
	require.Equal(t, api.WorkloadPod{Name: "legacy-sync-7d9f8b6c5-pod11", Node: "worker-2", LastSeen: time.Date(2026, 11, 21, 19, 11, 0, 0, time.UTC)}, dep.Pods[0])
	require.Equal(t, "legacy-sync-7d9f8b6c5-pod02", dep.Pods[9].Name, "the two oldest pods were dropped")
	require.Len(t, dep.SourceIPs, 10)
	require.Equal(t, "10.244.11.7", dep.SourceIPs[0].IP)

	require.Equal(t, &api.Workload{Namespace: "ci", ServiceAccount: "deployer",
		SourceIPs: []api.SourceIP{{IP: "192.0.2.10", LastSeen: time.Date(2026, 11, 21, 19, 10, 0, 1000, time.UTC)}}}, byUser["system:serviceaccount:ci:deployer"])
	require.Equal(t, &api.Workload{SourceIPs: []api.SourceIP{
		{IP: "198.51.100.4", LastSeen: time.Date(2026, 11, 21, 19, 10, 0, 1000, time.UTC)},
		{IP: "10.0.0.1", LastSeen: time.Date(2026, 11, 21, 19, 10, 0, 1000, time.UTC)}}}, byUser["alice"])

	// A real generated name is recognised; the record survives a restart.
	code, _ = s.post("/audit/webhook/master-0", "application/json", eventList(
		ev("dep-new", "user", podToken("apps", "legacy-sync", "legacy-sync-7d9f8b6c5-x2kqz", "worker-9"), "requestReceivedTimestamp", "2026-11-21T19:30:00Z")))
	require.Equal(t, 200, code)
	s = s.restart()
	obj = getAPI(t, s, "endpoints.v1")
	dep = workloadsOf(t, obj)["system:serviceaccount:apps:legacy-sync"].Workload
	require.Equal(t, &api.Owner{Kind: "Deployment", Name: "legacy-sync"}, dep.Owner)
	require.Equal(t, api.WorkloadPod{Name: "legacy-sync-7d9f8b6c5-x2kqz", Node: "worker-9", LastSeen: time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)}, dep.Pods[0])
	require.Len(t, dep.Pods, 10)
}

// workloadsOf indexes status.workloads by username, checking that each
// client is listed once and only if byUser lists it.
func workloadsOf(t *testing.T, obj api.APIRequestCount) map[string]api.ClientWorkload {
	t.Helper()
	listed := map[[3]string]bool{}
	for _, h := range obj.Status.Last24h {
		for _, n := range h.ByNode {
			for _, u := range n.ByUser {
				listed[[3]string{n.Cluster, u.UserName, u.UserAgent}] = true
			}
		}
	}
	out := map[string]api.ClientWorkload{}
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
	for i := range store.MaxImpersonators + 2 {
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
	got := map[string]api.PerUserAPIRequestCount{}
	for _, u := range obj.Status.CurrentHour.ByNode[0].ByUser {
		got[u.UserName] = u
	}
	require.Len(t, got, len(want))
	for user, n := range want {
		require.Equal(t, n, got[user].RequestCount, user)
	}
	workloads := workloadsOf(t, obj)
	imp := workloads[legacy].ImpersonatedBy
	require.Len(t, imp, store.MaxImpersonators, "the callers are capped")
	require.Equal(t, api.Impersonator{UserName: callers[len(callers)-1], LastSeen: time.Date(2026, 11, 21, 19, len(callers)-1, 0, 0, time.UTC)}, imp[0], "newest first")
	require.Equal(t, callers[2], imp[len(imp)-1].UserName, "the two oldest callers were dropped")
	require.Equal(t, []api.WorkloadPod{{Name: "legacy-7d9f8b6c5-x2kqz", Node: "worker-1", LastSeen: time.Date(2026, 11, 21, 19, len(callers)-1, 0, 0, time.UTC)}},
		workloads[legacy].Workload.Pods, "the impersonated user's pod-bound claims")

	require.True(t, got["system:kube-scheduler"].System, "system classification follows the impersonated user")
	require.Equal(t, []api.Impersonator{{UserName: "alice", LastSeen: time.Date(2026, 11, 21, 19, 10, 0, 1000, time.UTC)}}, workloads["system:kube-scheduler"].ImpersonatedBy)
	require.Equal(t, want["system:kube-scheduler"], obj.Status.SystemRequestCount)
	require.Empty(t, workloads["alice"].ImpersonatedBy)

	// The ?user= filter follows the impersonated user too.
	for user, apis := range map[string]int{legacy: 1, "admin-03": 0} {
		code, body := s.get("/apis/sunset.dev/v1/apirequestcounts?user=" + user)
		require.Equal(t, 200, code)
		var list api.APIRequestCountList
		require.NoError(t, json.Unmarshal(body, &list))
		require.Len(t, list.Items, apis, user)
	}
}
