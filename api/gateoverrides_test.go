package api

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/store"
)

func TestGateOverridesOfTheWindow(t *testing.T) {
	now := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	require.NoError(t, err)
	defer st.Close()
	for _, o := range []store.GateOverride{
		{Time: now.Add(-25 * time.Hour), Cluster: "prod", Source: "admission", Kind: "Cluster", Name: "prod", Reason: "old", From: "1.35.0", To: "1.36.0"},
		{Time: now.Add(-time.Hour), Cluster: "prod", Source: "admission", Kind: "Cluster", Namespace: "fleet", Name: "prod", User: "alice", Reason: "INC-4711", From: "1.36.3", To: "1.37.0"},
		{Time: now.Add(-time.Hour), Cluster: "staging", Source: "capi", Kind: "Cluster", Name: "staging", Reason: "test", From: "1.36.3", To: "1.37.0"},
	} {
		require.NoError(t, st.SaveGateOverride(o))
	}
	got, err := GateOverrides(st, "prod", 24*time.Hour, now)
	require.NoError(t, err)
	prod := sunsetv1.GateOverride{Time: now.Add(-time.Hour), Cluster: "prod", Source: "admission", Kind: "Cluster", Namespace: "fleet", Name: "prod", User: "alice",
		Reason: "INC-4711", From: "1.36.3", To: "1.37.0"}
	require.Equal(t, []sunsetv1.GateOverride{prod}, got)
	// Every cluster's, newest first; at the same time, in cluster order.
	got, err = GateOverrides(st, "", 26*time.Hour, now)
	require.NoError(t, err)
	require.Equal(t, []sunsetv1.GateOverride{prod,
		{Time: now.Add(-time.Hour), Cluster: "staging", Source: "capi", Kind: "Cluster", Name: "staging", Reason: "test", From: "1.36.3", To: "1.37.0"},
		{Time: now.Add(-25 * time.Hour), Cluster: "prod", Source: "admission", Kind: "Cluster", Name: "prod", Reason: "old", From: "1.35.0", To: "1.36.0"}}, got)
	got, err = GateOverrides(st, "none", 24*time.Hour, now)
	require.NoError(t, err)
	require.Equal(t, []sunsetv1.GateOverride{}, got)
}
