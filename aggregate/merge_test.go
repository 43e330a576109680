package aggregate

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// The newest hour decides an API's removed release; a request that
// announces none changes nothing, and the first that announces one fills
// it in whatever its hour.
func TestRemovedReleaseMerge(t *testing.T) {
	h := time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		stored, given string
		hour          time.Time
		want          string
	}{
		{"", "1.37", h.Add(-time.Hour), "1.37"},
		{"1.37", "1.38", h.Add(time.Hour), "1.38"},
		{"1.37", "1.38", h, "1.37"},
		{"1.37", "1.38", h.Add(-time.Hour), "1.37"},
		{"1.37", "", h.Add(time.Hour), "1.37"},
	} {
		require.Equal(t, tc.want, removedRelease(tc.stored, h, tc.given, tc.hour), "%+v", tc)
	}
}

// A workload record keeps the most recent pods, addresses and
// impersonators, each up to its cap.
func TestSightingMergeKeepsTheMostRecentWithinTheCaps(t *testing.T) {
	h := time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)
	var w store.Workload
	for i := range MaxPods + 2 {
		at := h.Add(time.Duration(i) * time.Minute)
		addSighting(&w, countkey.Sighting{PodName: fmt.Sprintf("pod-%02d", i), PodNode: "worker-1", SourceIPs: []string{fmt.Sprintf("10.0.0.%d", i)},
			ImpersonatedBy: fmt.Sprintf("admin-%02d", i), At: at})
	}
	require.Len(t, w.Pods, MaxPods)
	require.Len(t, w.SourceIPs, countkey.MaxSourceIPs)
	require.Len(t, w.ImpersonatedBy, MaxImpersonators)
	require.Equal(t, "pod-11", w.Pods[0].Name, "most recent first")
	require.Equal(t, "pod-02", w.Pods[MaxPods-1].Name, "the two oldest are gone")
	require.Equal(t, "10.0.0.2", w.SourceIPs[countkey.MaxSourceIPs-1].IP)
	require.Equal(t, "admin-02", w.ImpersonatedBy[MaxImpersonators-1].Username)

	// An older sighting of a kept pod changes nothing; a newer one moves
	// it first and keeps its node unless it names one.
	addSighting(&w, countkey.Sighting{PodName: "pod-05", PodNode: "worker-9", At: h})
	require.Equal(t, store.PodSeen{Name: "pod-05", Node: "worker-1", LastSeen: h.Add(5 * time.Minute)}, w.Pods[6])
	addSighting(&w, countkey.Sighting{PodName: "pod-05", At: h.Add(time.Hour)})
	require.Equal(t, store.PodSeen{Name: "pod-05", Node: "worker-1", LastSeen: h.Add(time.Hour)}, w.Pods[0])
}
