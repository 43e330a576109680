package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSparkline(t *testing.T) {
	require.Equal(t, "  ", Sparkline([]int64{0, 0}))
	require.Equal(t, " █", Sparkline([]int64{0, 1}))
	require.Equal(t, "▁▄█ ", Sparkline([]int64{1, 4, 8, 0}))
	require.Equal(t, "▁▁█", Sparkline([]int64{1, 2, 100}), "a single request is still visible")
}

func TestWorkloadAndDuration(t *testing.T) {
	require.Equal(t, "ci/deployer", Workload("system:serviceaccount:ci:deployer"))
	require.Empty(t, Workload("alice"))
	require.Empty(t, Workload("system:serviceaccount:broken"))
	require.Equal(t, "24h", FormatDuration(24*time.Hour))
	require.Equal(t, "168h", FormatDuration(7*24*time.Hour))
	require.Equal(t, "1h30m", FormatDuration(90*time.Minute))
}

func TestParseFormat(t *testing.T) {
	f, err := ParseFormat("")
	require.NoError(t, err)
	require.Equal(t, FormatTable, f)
	_, err = ParseFormat("xml")
	require.EqualError(t, err, `-o "xml" is not one of table, wide, json, yaml`)
}
