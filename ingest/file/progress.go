package file

import (
	"fmt"
	"strings"
	"time"
)

// ProgressLine renders one line of a terminal progress bar: a bar when the
// total is known, bytes, events and events per second.
func ProgressLine(bytes, total, events int64, elapsed time.Duration) string {
	var b strings.Builder
	if total > 0 {
		const width = 24
		frac := float64(bytes) / float64(total)
		frac = min(max(frac, 0), 1)
		filled := int(frac * width)
		b.WriteString("[" + strings.Repeat("=", filled))
		if filled < width {
			b.WriteString(">" + strings.Repeat(" ", width-filled-1))
		}
		fmt.Fprintf(&b, "] %3.0f%%  %s / %s", frac*100, humanBytes(bytes), humanBytes(total))
	} else {
		b.WriteString(humanBytes(bytes))
	}
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(events) / s
	}
	fmt.Fprintf(&b, "  %d events  %.0f events/s", events, rate)
	return b.String()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
