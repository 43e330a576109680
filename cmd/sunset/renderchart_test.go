package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMain serves the chart renderer as main does: scan and check --scan
// run this test binary again to render each chart.
func TestMain(m *testing.M) {
	if code, ok := renderChart(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// A chart whose template takes a gigabyte is that chart's error, within
// the default bound, and the rest of the scan is judged.
func TestScanRendersChartsWithinTheirBound(t *testing.T) {
	bomb := "../../scan/helmchart/testdata/bombs/repeat"
	stdout, stderr, code := runCLI("scan", "--target-version", "1.37", bomb, "../../scan/helmchart/testdata/bombs/normal")
	require.Equal(t, 1, code)
	require.Equal(t, "Error: "+bomb+": rendering: too large: the memory its templates take is larger than 512 MiB\n", stderr)
	require.Equal(t, "ORIGIN                                                                  KIND     NAME                  API VERSION    STATUS           REPLACEMENT\n"+
		"../../scan/helmchart/testdata/bombs/normal: normal/templates/cron.yaml  CronJob  release-name-nightly  batch/v1beta1  removed in 1.25  batch/v1 CronJob\n"+
		"INCOMPLETE: 1 input could not be read; fix it and scan again.\n", stdout)
}

// Only the one argument is the renderer; anything else is the CLI's.
func TestRenderChartIsOnlyItsArgument(t *testing.T) {
	for _, args := range [][]string{nil, {"scan"}, {"__render-chart", "x"}, {"scan", "__render-chart"}} {
		_, ok := renderChart(args)
		require.False(t, ok, args)
	}
}
