// Package test holds tests that check Sunset as a whole: the shipped
// deployment files and the binary itself.
package test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/plugin/pkg/audit/webhook"
)

// The example files in deploy/ load with kube-apiserver's own loaders.
func TestDeployFilesLoadInKubeAPIServerCode(t *testing.T) {
	p, err := policy.LoadPolicyFromFile("../deploy/audit-policy.yaml")
	require.NoError(t, err)
	require.Len(t, p.Rules, 2)
	require.Equal(t, "RequestReceived", string(p.OmitStages[0]))

	p, err = policy.LoadPolicyFromFile("../deploy/audit-policy-fields.yaml")
	require.NoError(t, err)
	require.Len(t, p.Rules, 3)
	require.Equal(t, "Request", string(p.Rules[0].Level))
	require.Equal(t, []string{"nodes/status"}, p.Rules[0].Resources[0].Resources)

	_, err = webhook.NewBackend("../deploy/audit-webhook.kubeconfig", auditv1.SchemeGroupVersion,
		wait.Backoff{Duration: time.Second, Steps: 1}, nil)
	// The example CA file does not exist here; everything before reading it parsed.
	require.ErrorContains(t, err, "/etc/kubernetes/sunset/ca.crt")
}
