package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOwner(t *testing.T) {
	for pod, want := range map[string][2]string{
		"web-7d9f8b6c5-x2kqz":                 {KindDeployment, "web"},
		"coredns-5d78c9869d-4xzbp":            {KindDeployment, "coredns"},
		"argo-cd-repo-server-6b8f4c7d9-zt5wq": {KindDeployment, "argo-cd-repo-server"},
		"backup-28890060-k7x2p":               {KindCronJob, "backup"},
		"postgres-0":                          {KindStatefulSet, "postgres"},
		"kafka-broker-12":                     {KindStatefulSet, "kafka-broker"},
		"kube-proxy-x7q2m":                    {KindDaemonSetOrJob, "kube-proxy"},
		"migrate-db-9zk4d":                    {KindDaemonSetOrJob, "migrate-db"},
		"debug":                               {KindPod, "debug"},
		"my-pod-name":                         {KindPod, "my-pod-name"},
		"web-7d9f8b6c5-x2kq":                  {KindPod, "web-7d9f8b6c5-x2kq"}, // 4 characters: not generated
	} {
		kind, name := Owner(pod)
		require.Equal(t, want, [2]string{kind, name}, pod)
	}
}

func TestServiceAccount(t *testing.T) {
	ns, sa, ok := ServiceAccount("system:serviceaccount:ci:deployer")
	require.True(t, ok)
	require.Equal(t, [2]string{"ci", "deployer"}, [2]string{ns, sa})
	for _, u := range []string{"alice", "system:serviceaccount:ci", "system:serviceaccount::x", "system:node:worker-1"} {
		_, _, ok := ServiceAccount(u)
		require.False(t, ok, u)
	}
}
