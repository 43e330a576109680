package main

import (
	"os"

	"github.com/kube-sunset/sunset/scan/helmchart"
)

// A chart's templates are programs, run on whatever a scan is given: a
// loop can take gigabytes or never end. So scan and check --scan render
// each chart in a child, this binary run again as `sunset __render-chart`
// (helmchart.ChildArg), which main serves before any command is parsed:
// no command of the CLI, no help, no flags. The child reads what to
// render on its standard input and answers on its standard output, within
// helmchart.DefaultMemory and helmchart.DefaultTimeout.

// renderChart serves helmchart.ChildArg: ok is false for any other
// arguments.
func renderChart(args []string) (code int, ok bool) {
	if len(args) != 1 || args[0] != helmchart.ChildArg {
		return 0, false
	}
	return helmchart.ServeChild(os.Stdin, os.Stdout, os.Stderr), true
}
