package scan

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kube-sunset/sunset/scan/report"
)

// ChartRenderer renders a chart directory or archive as `helm template`
// does, hooks included, with the Capabilities of the target release
// (.Capabilities.KubeVersion unless told otherwise, and
// .Capabilities.APIVersions). Package helmchart's Renderer is the one there is. A scan
// takes it as an interface because the Helm SDK is most of what rendering
// links: only the commands that scan charts pass one, and the server and
// the CLI's other commands, which import this package for its results and
// its cluster scan, do not link the SDK.
//
// A renderer reads a chart as a scan reads files: a symlink is followed
// only to a file inside the chart, only regular files are read, and what
// is read and what is rendered are bounded (MaxChartSize); what it leaves
// unread is in Skipped.
type ChartRenderer interface {
	Render(path string, caps Capabilities) (Rendered, error)
}

// Rendered is what a chart renders to, and the files of it left unread.
type Rendered struct {
	Manifests []Manifest
	Skipped   []report.Skipped
}

// MaxChartSize bounds the files of a chart a scan loads (subcharts and
// archives, decompressed, included), and, apart, what it renders.
const MaxChartSize = 64 << 20

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
	rendered, err := s.Charts.Render(path, s.Capabilities())
	if err != nil {
		return failed(path, err)
	}
	res := report.Result{Scanned: report.Scanned{Charts: 1}, Skipped: rendered.Skipped}
	total := 0
	for _, m := range rendered.Manifests {
		total += len(m.Text)
	}
	if total > MaxChartSize {
		return failed(path, &TooLargeError{What: "what the chart renders", Limit: MaxChartSize})
	}
	for _, m := range rendered.Manifests {
		objs, err := s.Judge.readObjects([]byte(m.Text))
		if tooLarge(err) {
			return failed(path, fmt.Errorf("%s rendered: %w", m.Template, err))
		}
		if res.Scanned.Objects+len(objs) > MaxObjects {
			return failed(path, errTooManyObjects)
		}
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
		// A copy: findings keep the template's name, which must not
		// keep the whole manifest (megabytes, for a release) alive.
		out = append(out, Manifest{Template: strings.Clone(template), Text: body})
	}
	return out
}

// Capabilities are what the scan's charts see: the target release and the
// APIs it serves, with the ones given beside them (--api-versions, a
// cluster's CRDs and aggregated APIs).
func (s Files) Capabilities() Capabilities {
	versions := ServedAPIVersions(s.Judge.Catalog, s.Judge.Target)
	for _, v := range s.APIVersions {
		if !slices.Contains(versions, v) {
			versions = append(versions, v)
		}
	}
	slices.Sort(versions)
	return Capabilities{KubeVersion: s.Judge.Target.String(), APIVersions: versions}
}
