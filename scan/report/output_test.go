package report_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/cli"
	"github.com/kube-sunset/sunset/scan/report"
)

// hostile is a finding whose every text comes from a hostile manifest or
// CRD: escape sequences, BEL, carriage return, a bidirectional override,
// Markdown and HTML.
func hostile() report.Result {
	return report.Result{TargetVersion: "1.37", Findings: []report.Finding{{
		Severity: catalog.StateRemoved, Rule: "removed-api\x07", APIVersion: "evil.io/v1\x1b[2J", Kind: "Widget\r", Name: "w\x1b]0;pwned\x07|<b>",
		Namespace: "ns\u202e", RemovedIn: "1.37\x1b[1m", Replacement: "good.io/v1 Widget\n", Message: "move\x1b[2J on", Source: "crd\x1b[2J",
		Origin: report.Origin{Path: "dir/\x1b[2Ja.yaml", Line: 3},
	}}}
}

// Table, wide and markdown escape every text with the tables' helper, as
// `sunset scan` prints them; no control character is left.
func TestTextOutputsEscapeScannedStrings(t *testing.T) {
	for format, want := range map[string]string{
		"table": "ORIGIN             KIND      NAME                 API VERSION      STATUS                REPLACEMENT\n" +
			`dir/^[[2Ja.yaml:3  Widget\r  w^[]0;pwned\x07|<b>  evil.io/v1^[[2J  removed in 1.37^[[1m  good.io/v1 Widget\n` + "\n",
		"wide": "ORIGIN             NAMESPACE  KIND      NAME                 API VERSION      STATUS                REPLACEMENT          RULE             SOURCE    MESSAGE\n" +
			`dir/^[[2Ja.yaml:3  ns\u202e   Widget\r  w^[]0;pwned\x07|<b>  evil.io/v1^[[2J  removed in 1.37^[[1m  good.io/v1 Widget\n  removed-api\x07  crd^[[2J  move^[[2J on` + "\n",
		"markdown": "### Kubernetes API scan for 1.37\n\n" +
			"NOT SAFE to upgrade to 1.37: 1 object uses APIs removed in or before 1.37.\n\n" +
			"| Status | Origin | Kind | Name | API version | Replacement |\n|---|---|---|---|---|---|\n" +
			`| :x: removed in 1.37^\[\[1m | ` + "`dir/^[[2Ja.yaml:3`" + ` | Widget\r | w^\[\]0;pwned\x07\|&lt;b&gt; | ` + "`evil.io/v1^[[2J`" + ` | good.io/v1 Widget\n |` + "\n\n" +
			"\n<sub>Scanned nothing (0 objects).</sub>\n",
	} {
		var b bytes.Buffer
		require.NoError(t, hostile().Write(&b, format, "test", cli.Terminal), format)
		require.Equal(t, want, b.String(), format)
	}
}
