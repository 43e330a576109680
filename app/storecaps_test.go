package app_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// max-apiservers-per-cluster and max-stored-clusters reach the store: a
// sender that invents apiserver and cluster names gets the first ones
// kept and the rest counted under "other", every request still counted.
func TestStoreCapsComeFromTheConfig(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxAPIServersPerCluster, cfg.MaxStoredClusters = 2, 2
	s := start(t, cfg)
	for i, path := range []string{
		"/audit/webhook/master-0", "/audit/webhook/master-1", "/audit/webhook/master-2", "/audit/webhook/master-3",
		"/audit/webhook/prod/master-0", "/audit/webhook/dev/master-0", "/audit/webhook/test/master-0",
	} {
		code, body := s.post(path, "application/json", eventList(ev(fmt.Sprintf("id-%d", i))))
		require.Equal(t, 200, code, "%s: %s", path, body)
	}
	obj := getAPI(t, s, "endpoints.v1")
	nodes := map[string]int64{}
	for _, n := range obj.Status.Last24h[19].ByNode {
		nodes[n.Cluster+"/"+n.NodeName] += n.RequestCount
	}
	require.Equal(t, map[string]int64{
		"default/master-0": 1, "default/master-1": 1, "default/other": 2,
		"prod/master-0": 1, "other/master-0": 2, // the cap on apiservers holds within "other" too
	}, nodes)
	require.Equal(t, int64(7), obj.Status.RequestCount)
}
