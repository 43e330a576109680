package scan

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kube-sunset/sunset/scan/report"
)

// ChartRenderer renders a chart directory or archive as `helm template`
// does, hooks included, with .Capabilities.KubeVersion at target unless
// told otherwise. Package helmchart's Renderer is the one there is. A scan
// takes it as an interface because the Helm SDK is most of what rendering
// links: only the commands that scan charts pass one, and the server and
// the CLI's other commands, which import this package for its results and
// its cluster scan, do not link the SDK.
type ChartRenderer interface {
	Render(path, target string) ([]Manifest, error)
}

// errNoChartRenderer is a chart found by a scan given no ChartRenderer:
// its objects are unknown, not safe.
var errNoChartRenderer = errors.New("charts are not rendered by this scan")

// chart renders a chart directory or archive as `helm template` does,
// hooks included, and judges what it renders. A chart that cannot be
// loaded or rendered is an error: its objects are unknown, not safe.
func (s Files) chart(path string) report.Result {
	s.progress("chart", path)
	if s.Charts == nil {
		return failed(path, errNoChartRenderer)
	}
	manifests, err := s.Charts.Render(path, s.Judge.Target.String())
	if err != nil {
		return failed(path, err)
	}
	res := report.Result{Scanned: report.Scanned{Charts: 1}}
	for _, m := range manifests {
		objs, err := s.Judge.readObjects([]byte(m.Text))
		if err != nil {
			res.Errors = append(res.Errors, report.InputError{Path: path, Err: fmt.Sprintf("%s rendered: %v", m.Template, err)})
		}
		res.Scanned.Objects += len(objs)
		for _, o := range objs {
			res.Findings = append(res.Findings, s.Judge.Judge(o, report.Origin{Path: path, Template: m.Template})...)
		}
	}
	return res
}

// Manifest is the rendered output of one template, as the chart names it
// (mychart/templates/ingress.yaml).
type Manifest struct{ Template, Text string }

// SplitManifest cuts a release's manifest into its templates' output. Helm
// writes each as "---\n# Source: <chart>/templates/<file>\n<yaml>".
func SplitManifest(m string) []Manifest {
	var out []Manifest
	for _, part := range strings.Split("\n"+m, "\n---\n") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		header, body, _ := strings.Cut(part, "\n")
		template, ok := strings.CutPrefix(header, "# Source: ")
		if !ok {
			template, body = "", part
		}
		out = append(out, Manifest{Template: template, Text: body})
	}
	return out
}
