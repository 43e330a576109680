package benchmarks

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"os"
	"strconv"
)

// A small SVG line-chart writer for the scale curve: a grid of panels,
// one per metric, each with its axes, ticks, a legend and an optional
// target line. A plotting library would be a dependency of the whole
// module for one picture.

// chartLine is one line of a panel: points (xs[i], ys[i]), in order.
type chartLine struct {
	name   string
	xs, ys []float64
}

// chart is one panel.
type chart struct {
	title          string
	xLabel, yLabel string
	logX, logY     bool
	lines          []chartLine
	// target, when above zero, is drawn as a dashed horizontal line.
	target float64
	// markX, when above zero, is drawn as a dashed vertical line labelled
	// markLabel.
	markX     float64
	markLabel string
}

// The lines' colours, by position in a panel (colour-blind safe, Okabe-Ito).
var chartColours = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"}

const (
	panelW, panelH                  = 460, 320
	plotLeft, plotRight             = 70, 20
	plotTop, plotBottom             = 40, 50
	chartFont                       = "font-family=\"sans-serif\""
	tickLen                         = 5
	legendRow, legendSwatch         = 16, 18
	minLogSpan              float64 = 1e-9
)

// writeCharts writes the panels into path as one SVG, cols panels a row.
func writeCharts(path, title string, charts []chart, cols int) error {
	rows := (len(charts) + cols - 1) / cols
	w, h := cols*panelW, rows*panelH+30
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s font-size="12">`+"\n", w, h, w, h, chartFont)
	fmt.Fprintf(&buf, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&buf, `<text x="%d" y="20" text-anchor="middle" font-size="15" font-weight="bold">%s</text>`+"\n", w/2, html.EscapeString(title))
	for i, c := range charts {
		x0, y0 := (i%cols)*panelW, 30+(i/cols)*panelH
		fmt.Fprintf(&buf, `<g transform="translate(%d,%d)">`+"\n", x0, y0)
		c.draw(&buf)
		buf.WriteString("</g>\n")
	}
	buf.WriteString("</svg>\n")
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// axis maps data values onto [lo, hi] pixels, linearly or by log10.
type axis struct {
	log        bool
	min, max   float64 // data range, after rounding out to ticks
	lo, hi     float64 // pixels
	ticks      []float64
	minorTicks []float64
}

func (a axis) at(v float64) float64 {
	f := 0.0
	if a.log {
		f = (math.Log10(v) - math.Log10(a.min)) / (math.Log10(a.max) - math.Log10(a.min))
	} else {
		f = (v - a.min) / (a.max - a.min)
	}
	return a.lo + f*(a.hi-a.lo)
}

// newAxis chooses a range and ticks covering [min, max]: powers of ten on
// a log axis, with the 2-9 multiples between them as minor ticks; 1, 2 or
// 5 times a power of ten on a linear one, from zero.
func newAxis(log bool, lo, hi, vmin, vmax float64) axis {
	a := axis{log: log, lo: lo, hi: hi}
	if log {
		vmin = max(vmin, minLogSpan)
		vmax = max(vmax, vmin)
		a.min = math.Pow(10, math.Floor(math.Log10(vmin)))
		a.max = math.Pow(10, math.Ceil(math.Log10(vmax)))
		if a.max <= a.min {
			a.max = a.min * 10
		}
		for p := a.min; p <= a.max*1.0001; p *= 10 {
			a.ticks = append(a.ticks, p)
			for m := 2.0; m < 10 && p*m < a.max; m++ {
				a.minorTicks = append(a.minorTicks, p*m)
			}
		}
		return a
	}
	a.min = 0
	if vmax <= 0 {
		vmax = 1
	}
	step := niceStep(vmax / 5)
	a.max = math.Ceil(vmax/step) * step
	for v := 0.0; v <= a.max+step/2; v += step {
		a.ticks = append(a.ticks, v)
	}
	return a
}

// niceStep is the least of 1, 2 or 5 times a power of ten at or above v.
func niceStep(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel prints a tick value without trailing zeros, with thousands as k.
func tickLabel(v float64) string {
	switch {
	case v >= 1e6 && math.Mod(v, 1e6) == 0:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3 && math.Mod(v, 1e3) == 0:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func (c chart) draw(buf *bytes.Buffer) {
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, l := range c.lines {
		for i := range l.xs {
			xmin, xmax = min(xmin, l.xs[i]), max(xmax, l.xs[i])
			ymin, ymax = min(ymin, l.ys[i]), max(ymax, l.ys[i])
		}
	}
	if c.target > 0 {
		ymin, ymax = min(ymin, c.target), max(ymax, c.target)
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax, ymin, ymax = 1, 10, 1, 10
	}
	left, right := float64(plotLeft), float64(panelW-plotRight)
	top, bottom := float64(plotTop), float64(panelH-plotBottom)
	var xa axis
	if c.logX {
		xa = newAxis(true, left, right, xmin, xmax)
	} else {
		xa = axis{min: math.Floor(xmin), max: math.Ceil(xmax), lo: left, hi: right}
		step := niceStep((xa.max - xa.min) / 6)
		xa.min = math.Floor(xa.min/step) * step
		for v := xa.min; v <= xa.max+step/2; v += step {
			xa.ticks = append(xa.ticks, v)
		}
		xa.max = xa.ticks[len(xa.ticks)-1]
	}
	ya := newAxis(c.logY, bottom, top, ymin, ymax)

	fmt.Fprintf(buf, `<text x="%d" y="20" text-anchor="middle" font-size="13" font-weight="bold">%s</text>`+"\n", panelW/2, html.EscapeString(c.title))
	// Grid and ticks.
	for _, t := range ya.ticks {
		y := ya.at(t)
		fmt.Fprintf(buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, right, y)
		fmt.Fprintf(buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left-tickLen, y, left, y)
		fmt.Fprintf(buf, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-tickLen-3, y, tickLabel(t))
	}
	for _, t := range ya.minorTicks {
		y := ya.at(t)
		fmt.Fprintf(buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left-tickLen/2, y, left, y)
	}
	for _, t := range xa.ticks {
		x := xa.at(t)
		fmt.Fprintf(buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, top, x, bottom)
		fmt.Fprintf(buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x, bottom, x, bottom+tickLen)
		fmt.Fprintf(buf, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, bottom+tickLen+13, tickLabel(t))
	}
	for _, t := range xa.minorTicks {
		x := xa.at(t)
		fmt.Fprintf(buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x, bottom, x, bottom+tickLen/2)
	}
	// Axes and their labels.
	fmt.Fprintf(buf, `<polyline points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="black"/>`+"\n", left, top, left, bottom, right, bottom)
	fmt.Fprintf(buf, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", (left+right)/2, panelH-10, html.EscapeString(c.xLabel))
	fmt.Fprintf(buf, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n", (top+bottom)/2, (top+bottom)/2, html.EscapeString(c.yLabel))
	// Target and mark.
	if c.target > 0 {
		y := ya.at(c.target)
		fmt.Fprintf(buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="6 4"/>`+"\n", left, y, right, y)
		fmt.Fprintf(buf, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#c00">target %s</text>`+"\n", right-2, y-4, tickLabel(c.target))
	}
	if c.markX > 0 {
		x := xa.at(c.markX)
		fmt.Fprintf(buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="4 4"/>`+"\n", x, top, x, bottom)
		fmt.Fprintf(buf, `<text x="%.1f" y="%.1f" fill="#555">%s</text>`+"\n", x+4, bottom-6, html.EscapeString(c.markLabel))
	}
	// Lines and their points.
	for i, l := range c.lines {
		colour := chartColours[i%len(chartColours)]
		var pts bytes.Buffer
		for j := range l.xs {
			fmt.Fprintf(&pts, "%.1f,%.1f ", xa.at(l.xs[j]), ya.at(l.ys[j]))
		}
		fmt.Fprintf(buf, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", bytes.TrimSpace(pts.Bytes()), colour)
		if len(l.xs) <= 12 {
			for j := range l.xs {
				fmt.Fprintf(buf, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", xa.at(l.xs[j]), ya.at(l.ys[j]), colour)
			}
		}
	}
	// Legend, top left inside the plot.
	if len(c.lines) > 1 || c.lines != nil && c.lines[0].name != "" {
		lw := 0
		for _, l := range c.lines {
			lw = max(lw, len(l.name))
		}
		fmt.Fprintf(buf, `<rect x="%.1f" y="%.1f" width="%d" height="%d" fill="white" fill-opacity="0.85" stroke="#999"/>`+"\n",
			left+8, top+6, legendSwatch+14+7*lw, 6+legendRow*len(c.lines))
		for i, l := range c.lines {
			y := top + 6 + float64(legendRow*i) + 11
			fmt.Fprintf(buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n",
				left+13, y, left+13+legendSwatch, y, chartColours[i%len(chartColours)])
			fmt.Fprintf(buf, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", left+18+legendSwatch, y, html.EscapeString(l.name))
		}
	}
}
