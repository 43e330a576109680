package cli

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

func TestTerminalEscapesControls(t *testing.T) {
	for in, want := range map[string]string{
		"kubectl/v1.36.3 (linux/amd64)": "kubectl/v1.36.3 (linux/amd64)",
		"café ünïcode 名前":               "café ünïcode 名前",
		"a\x1b[2Jb":                     `a^[[2Jb`,
		"a\rb":                          `a\rb`,
		"a\tb\nc":                       `a\tb\nc`,
		"nul\x00bel\x07del\x7f":         `nul\x00bel\x07del\x7f`,
		"csi\u009b2J":                   `csi\u009b2J`,
		"rlo\u202eevil\u2066":           `rlo\u202eevil\u2066`,
		"bad\xffutf8":                   `bad\xffutf8`,
		"":                              "",
	} {
		t.Run(strconv.Quote(in), func(t *testing.T) {
			require.Equal(t, want, Terminal(in), "%q", in)
		})
	}
}

// A user agent that clears the screen and forges a row of the table
// stays in its own cell of its own row.
func TestTablesEscapeAuditStrings(t *testing.T) {
	const agent = "evil\x1b[2J\tforged\nfake.v1   1.99   999   999   mallory   x"
	rows := []tableRow{{Name: "endpoints.v1", CurrentHour: 1, Last24h: 2, Window: 2, TopUser: "eve\tadmin", TopUserAgent: agent,
		Nodes: []string{"master\n0"}, Workload: "ns/\x1bsa"}}
	var b bytes.Buffer
	require.NoError(t, writeTable(&b, rows, reportOptions{Since: 24 * time.Hour}, true))
	require.Equal(t, "NAME           REMOVED IN   REQUESTS (CURRENT HOUR)   REQUESTS (24H)   TOP USER     TOP USER AGENT                                                REPLACEMENT   NODES       WORKLOAD\n"+
		`endpoints.v1   -            1                         2                eve\tadmin   evil^[[2J\tforged\nfake.v1   1.99   999   999   mallory   x   -             master\n0   ns/^[sa`+"\n", b.String())

	obj := sunsetv1.APIRequestCount{Metadata: metav1.ObjectMeta{Name: "endpoints.v1"}}
	obj.Spec.NumberOfUsersToReport = 10
	obj.Status.RequestCount = 1
	obj.Status.Last24h = make([]sunsetv1.PerResourceAPIRequestLog, 24)
	obj.Status.Last24h[0] = sunsetv1.PerResourceAPIRequestLog{RequestCount: 1, ByNode: []sunsetv1.PerNodeAPIRequestLog{{NodeName: "m\x1b]0;x\x07", Cluster: "c\nd", RequestCount: 1,
		ByUser: []sunsetv1.PerUserAPIRequestCount{{UserName: "eve\tadmin", UserAgent: agent, RequestCount: 1, ByVerb: []sunsetv1.PerVerbAPIRequestCount{{Verb: "get\n", RequestCount: 1}}}}}}}
	b.Reset()
	require.NoError(t, describeAPI(&b, obj, time.Date(2026, 11, 21, 23, 30, 0, 0, time.UTC), reportOptions{}))
	require.Equal(t, `Name:           endpoints.v1
Removed in:     -
Deprecated in:  -
Replacement:    -
Warning:        -
Requests:       1 in the last 24h, 0 in the current hour

Last 24h, per UTC hour from 00:00 to 23:00:
  █                       
  peak 1 request in an hour

By node (last 24h):
  NODE          CLUSTER   REQUESTS
  m^[]0;x\x07   c\nd      1

By user (last 24h):
  USER         USER AGENT                                                    WORKLOAD   REQUESTS   VERBS
  eve\tadmin   evil^[[2J\tforged\nfake.v1   1.99   999   999   mallory   x   -          1          get\n=1
`, b.String())
}

// The upgrade gate's lines and the webhook tables escape what came from
// audit data too.
func TestCheckAndWebhooksEscapeAuditStrings(t *testing.T) {
	res := CheckResult{sunsetv1.CheckResult{Since: "24h", Message: "UNSAFE\x1b[2J", Findings: []sunsetv1.Finding{{
		Warning: "x.v1beta1.evil\rSAFE", Requests: 1, ClientCount: 2, Clients: []string{"eve\nSAFE to upgrade", "bob"}}}}}
	var b bytes.Buffer
	require.NoError(t, res.WriteText(&b))
	require.Equal(t, `Warning: x.v1beta1.evil\rSAFE (1 request in 24h by 2 clients: eve\nSAFE to upgrade, bob)`+"\nUNSAFE^[[2J\n", b.String())

	var list sunsetv1.WebhookCountList
	list.Items = []sunsetv1.WebhookCount{{Metadata: metav1.ObjectMeta{Name: "hook\x1b[31m.example"}}}
	list.Items[0].Spec.Types = []string{"validating"}
	list.Items[0].Status.ByResource = []sunsetv1.WebhookResourceCount{{Name: "pods\tforged", Cluster: "c\n", WebhookCounts: sunsetv1.WebhookCounts{RequestCount: 1, CallCount: 1}}}
	b.Reset()
	require.NoError(t, writeWebhookTables(&b, list, true))
	require.Equal(t, "CLUSTER   WEBHOOK              TYPE         RESOURCE       CLASS   REQUESTS   CALLS   MUTATED   FAILED OPEN   SLOW   WEBHOOK LATENCY   MEAN   <=0.5S   <=1S   <=2S   <=5S   <=10S   >10S\n"+
		`c\n       hook^[[31m.example   validating   pods\tforged   -       1          1       0         0             0      0s                -      0        0      0      0      0       0`+"\n", b.String())
}
