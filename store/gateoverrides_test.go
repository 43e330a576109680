package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGateOverridesNewestFirstPerClusterAndKept(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, hour19)
	at := func(min int) time.Time { return hour19.Add(time.Duration(min) * time.Minute) }
	saved := []GateOverride{
		{Time: at(1), Cluster: "prod", Source: "admission", Kind: "Cluster", Namespace: "fleet", Name: "prod", User: "alice", Reason: "INC-1", From: "1.36.3", To: "1.37.0"},
		{Time: at(5), Cluster: "prod", Source: "capi", Kind: "Cluster", Namespace: "fleet", Name: "prod", Reason: "INC-1", From: "1.36.3", To: "1.37.0"},
		{Time: at(3), Cluster: "prod\x00x", Source: "admission", Kind: "Cluster", Name: "evil", Reason: "shares the prefix", From: "1.36", To: "1.37"},
		{Time: at(2), Cluster: "staging", Source: "admission", Kind: "KubeadmControlPlane", Namespace: "fleet", Name: "staging", User: "bob", Reason: "test", From: "1.35", To: "1.36"},
	}
	for _, o := range saved {
		require.NoError(t, s.SaveGateOverride(o))
	}
	got, err := s.GateOverrides("prod", hour19)
	require.NoError(t, err)
	require.Equal(t, []GateOverride{saved[1], saved[0]}, got)
	got, err = s.GateOverrides("prod", at(2))
	require.NoError(t, err)
	require.Equal(t, []GateOverride{saved[1]}, got)
	got, err = s.GateOverrides("none", hour19)
	require.NoError(t, err)
	require.Equal(t, []GateOverride{}, got)
	require.NoError(t, s.Close())

	// Kept across a restart.
	s = openTest(t, dir, hour19)
	defer s.Close()
	got, err = s.GateOverrides("staging", time.Time{})
	require.NoError(t, err)
	require.Equal(t, []GateOverride{saved[3]}, got)

	for range MaxGateOverrides + 5 {
		require.NoError(t, s.SaveGateOverride(GateOverride{Time: at(10).Add(time.Duration(len(got)) * time.Second), Cluster: "busy", Reason: "r"}))
		got = append(got, GateOverride{})
	}
	busy, err := s.GateOverrides("busy", time.Time{})
	require.NoError(t, err)
	require.Len(t, busy, MaxGateOverrides)
	require.Equal(t, at(10).Add(time.Duration(MaxGateOverrides+5)*time.Second), busy[0].Time, "the newest first")
}
