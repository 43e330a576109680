package systemusers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClassifier(t *testing.T) {
	def := New(nil)
	require.True(t, def.IsSystem("system:apiserver"))
	require.True(t, def.IsSystem("system:serviceaccount:kube-system:generic-garbage-collector"))
	require.False(t, def.IsSystem("system:serviceaccount:ci:deployer"))
	require.False(t, def.IsSystem("alice"))

	custom := New([]string{"system:node:*", "argo"})
	require.True(t, custom.IsSystem("system:node:worker-1"))
	require.True(t, custom.IsSystem("argo"))
	require.False(t, custom.IsSystem("system:apiserver"), "a configured list replaces the defaults")
	require.False(t, New([]string{}).IsSystem("system:apiserver"), "an empty list classifies nothing as system")
}
