package benchmarks

import (
	"fmt"
	"strings"
	"time"
)

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// scaleTable is the curve as a Markdown table, a row per step.
func scaleTable(results []*scaleResult) string {
	var sb strings.Builder
	sb.WriteString("| step | requests | series-hours | GET since=720h p50 / p99 | list p99 | scrape p99 | first GET / list / scrape | GET / list body | GET / list floor p99 | serve peak RSS | disk | disk per request | load |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&sb, "| %s=%d | %d | %d | %.1f / %.1f ms | %.1f ms | %.1f ms | %.0f / %.0f / %.0f ms | %.2f / %.2f MB | %.1f / %.1f ms | %.0f MiB | %.2f MiB | %.0f B | %.1f |\n",
			r.dim, r.value, r.fill.requests, r.fill.seriesHours, ms(r.get.Quantile(0.5)), ms(r.get.Quantile(0.99)),
			ms(r.list.Quantile(0.99)), ms(r.scrape.Quantile(0.99)), ms(r.first[0]), ms(r.first[1]), ms(r.first[2]),
			float64(r.getBytes)/1e6, float64(r.listBytes)/1e6, ms(r.getFloor.Quantile(0.99)), ms(r.listFloor.Quantile(0.99)),
			r.rssMiB, float64(r.fill.disk)/(1<<20), float64(r.fill.disk)/float64(r.fill.requests), r.load)
	}
	return sb.String()
}

// scaleCharts are the panels of scale.svg: each metric against the step's
// factor over the base, a line per dimension, and the steady run's disk by
// day.
func scaleCharts(results []*scaleResult, steady []int64) []chart {
	metric := func(title, unit string, logY bool, target float64, y func(*scaleResult) float64) chart {
		c := chart{title: title, xLabel: "step, times the base (log)", yLabel: unit, logX: true, logY: logY, target: target}
		for _, dim := range scaleDims {
			l := chartLine{name: fmt.Sprintf("%s %d to %d", dim.name, dim.steps[0], dim.steps[len(dim.steps)-1])}
			for _, r := range results {
				if r.dim == dim.name {
					l.xs, l.ys = append(l.xs, r.factor), append(l.ys, y(r))
				}
			}
			c.lines = append(c.lines, l)
		}
		return c
	}
	charts := []chart{
		metric("GET one API, since=720h: p99", "ms (log)", true, getTargetMs, func(r *scaleResult) float64 { return ms(r.get.Quantile(0.99)) }),
		metric("List of every API: p99", "ms (log)", true, listTargetMs, func(r *scaleResult) float64 { return ms(r.list.Quantile(0.99)) }),
		metric("/metrics scrape: p99", "ms (log)", true, scrapeTargetMs, func(r *scaleResult) float64 { return ms(r.scrape.Quantile(0.99)) }),
		metric("sunset serve: peak RSS", "MiB", false, 0, func(r *scaleResult) float64 { return r.rssMiB }),
		metric("Data directory after a close", "MiB (log)", true, 0, func(r *scaleResult) float64 { return float64(r.fill.disk) / (1 << 20) }),
	}
	if len(steady) > 0 {
		l := chartLine{name: fmt.Sprintf("%d requests an hour", steadyShape.perHour())}
		for d, v := range steady {
			l.xs, l.ys = append(l.xs, float64(d+1)), append(l.ys, float64(v)/(1<<20))
		}
		charts = append(charts, chart{title: fmt.Sprintf("Steady load, %d simulated days", len(steady)), xLabel: "simulated day",
			yLabel: "MiB on disk", lines: []chartLine{l}, markX: float64(len(steady) / 2), markLabel: "retention full"})
	}
	return charts
}
