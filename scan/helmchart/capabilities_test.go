package helmchart

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan"
)

const (
	apiServiceV1      = "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1beta1.metrics.example.com"
	apiServiceV1beta1 = "apiVersion: apiregistration.k8s.io/v1beta1\nkind: APIService\nmetadata:\n  name: v1beta1.metrics.example.com"
	podSecurityPolicy = "apiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: restricted\nspec:\n  privileged: false"
	widget            = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: gadget"
)

// TestChartsSeeWhatTheTargetServes renders a chart that picks its
// apiVersions by .Capabilities.APIVersions at several targets, in this
// process and through a Child, and checks exactly what each renders.
func TestChartsSeeWhatTheTargetServes(t *testing.T) {
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		target string
		extra  []string
		want   map[string]string
	}{
		// apiregistration.k8s.io/v1 came in 1.10, policy/v1beta1
		// PodSecurityPolicy in 1.10 and went in 1.25.
		{target: "1.9", want: map[string]string{"apiservice.yaml": apiServiceV1beta1}},
		{target: "1.10", want: map[string]string{"apiservice.yaml": apiServiceV1, "psp.yaml": podSecurityPolicy}},
		{target: "1.24", want: map[string]string{"apiservice.yaml": apiServiceV1, "psp.yaml": podSecurityPolicy}},
		{target: "1.25", want: map[string]string{"apiservice.yaml": apiServiceV1}},
		{target: "1.37", want: map[string]string{"apiservice.yaml": apiServiceV1}},
		{target: "1.37", extra: []string{"example.com/v1"}, want: map[string]string{"apiservice.yaml": apiServiceV1, "widget.yaml": widget}},
	} {
		files := scan.Files{Judge: scan.Judge{Catalog: cat, Target: catalog.MustParseRelease(tc.target)}, APIVersions: tc.extra}
		caps := files.Capabilities()
		for _, r := range []Renderer{{}, {Child: &Child{}}} {
			rendered, err := r.Render("testdata/capabilities", caps)
			require.NoError(t, err)
			got := map[string]string{}
			for _, m := range rendered.Manifests {
				got[strings.TrimPrefix(m.Template, "capabilities/templates/")] = strings.TrimSpace(m.Text)
			}
			require.Equal(t, tc.want, got, "target %s, extra %v, in a child: %t", tc.target, tc.extra, r.Child != nil)
		}
	}
}
