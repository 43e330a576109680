package scan

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pad is an entry of n bytes that no skim parses: a ConfigMap's data, say.
func pad(n int) string {
	return "data:\n" + strings.Repeat("  a: b\n", n/7)
}

// The skim of a large document finds what parsing it whole finds.
func TestSkimReadsWhatTheTreeReads(t *testing.T) {
	j := testJudge(t)
	big := pad(300 << 10)
	for name, doc := range map[string]string{
		"object":            "# comment\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: report\n  namespace: shop\n" + big,
		"keys in any order": big + "metadata:\n  labels: {a: b}\n  namespace: 'shop'\n  name: \"report\"\nkind: CronJob # a comment\napiVersion: batch/v1beta1\n",
		"flow metadata":     "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: report, namespace: shop}\n" + big,
		"block scalars and quotes that look like keys": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    note: |\n      kind: Evil\n  name: cm\n" +
			"  labels:\n    x: \"a\n      kind: Evil\"\n    y: 'it''s\n      kind: Evil'\n" + big + "binaryData: >-\n  kind: Evil\n",
		"list": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: batch/v1beta1\n  kind: CronJob\n  metadata:\n    name: one\n  spec:\n    x: |\n      kind: Evil\n" +
			"-\n  kind: Ingress\n  apiVersion: extensions/v1beta1\n  metadata: {name: two}\n" +
			"- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: three\n  " + strings.ReplaceAll(big, "\n", "\n  ") + "\n",
		"indented list": "kind: List\napiVersion: v1\nitems:\n  - apiVersion: batch/v1beta1\n    kind: CronJob\n    metadata:\n      name: one\n  - kind: Ingress\n    apiVersion: extensions/v1beta1\n" + big,
		"inline list":   "apiVersion: v1\nkind: List\nitems: [{apiVersion: batch/v1beta1, kind: CronJob, metadata: {name: one}}]\n" + big,
		"large metadata": "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  annotations:\n    big: |\n" + strings.Repeat("      kind: Evil\n", 600<<10/17) +
			"  name: report\n  namespace: shop\nspec: {}\n",
		"json": `{"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "report", "namespace": "shop"}, "data": {"a": "` + strings.Repeat("b", 300<<10) + `"}}`,
		"json list": "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"apiVersion\": \"batch/v1beta1\", \"kind\": \"CronJob\", \"metadata\": {\"name\": \"one\"}}, " +
			`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "two"}, "data": {"a": "` + strings.Repeat("b", 300<<10) + `"}}]}`,
		"not an object": "replicas: 3\n" + big,
		"a sequence":    "- apiVersion: v1\n  kind: ConfigMap\n- " + big,
		// Quoted scalars and flow collections that run on at column 0.
		"quote at column 0": "apiVersion: v1\nnote: \"a\nkind: Evil\"\nkind: ConfigMap\nother: 'b\nkind: Evil'\n" + big,
		"flow at column 0":  "apiVersion: v1\nnote: [a,\nkind: Evil]\nkind: ConfigMap\nmetadata: {\nname: cm}\n" + big,
	} {
		t.Run(name, func(t *testing.T) {
			require.Greater(t, len(doc), treeDocumentSize, "skimmed")
			want, err := j.treeObjects([]byte(doc), 5)
			require.NoError(t, err)
			got, err := j.skimObjects([]byte(doc), 5)
			require.NoError(t, err)
			if name == "json list" {
				// Items of a large JSON List are at the List's line.
				for i := range want {
					want[i].Line = 5
				}
			}
			require.Equal(t, want, got)
		})
	}
}

// What the skim does not read is refused, rather than parsed whole: a
// complex key, a merge key.
func TestSkimRefusesWhatItCannotPlace(t *testing.T) {
	j := testJudge(t)
	big := pad(300 << 10)
	for name, doc := range map[string]string{
		"complex key": "? apiVersion\n: v1\nkind: ConfigMap\n" + big,
		"merge key":   "<<: {apiVersion: v1}\nkind: ConfigMap\n" + big,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := j.readObjects([]byte("---\n" + doc))
			require.EqualError(t, err, "too large: the YAML document at line 1, not plain block YAML, is larger than 256 KiB")
		})
	}
	// Found twice, a key is an error, as parsing it whole says.
	_, err := j.readObjects([]byte("apiVersion: v1\nkind: ConfigMap\nkind: Secret\n" + big))
	require.EqualError(t, err, `line 3: mapping key "kind" already defined`)
}

// One 3 MiB document in a release record was parsed into a node tree of
// 286 MiB. It is skimmed: the release's findings are exact and the heap
// stays under 40 MiB (165 MiB parsed whole, measured).
func TestLargeReleaseDocumentIsSkimmed(t *testing.T) {
	manifest := "---\n# Source: app/templates/cron.yaml\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: first}\n" +
		"---\n# Source: app/templates/big.yaml\napiVersion: extensions/v1beta1\nkind: Ingress\nmetadata:\n  name: big\n" + pad(MaxDocumentSize-1024)
	secret := helmSecret(t, "shop", "web", map[string]string{"manifest": manifest})
	a := &apiserver{t: t, records: []helmRecord{{namespace: "shop", name: "web", revision: 1, data: func() []byte { return secret.Data["release"] }}}}
	c, err := NewCluster(a.config(), testJudge(t))
	require.NoError(t, err)

	var findings, errs []string
	peak := peakHeap(t, func() {
		res, err := c.Scan(context.Background())
		require.NoError(t, err)
		for _, f := range res.Findings {
			findings = append(findings, f.Origin.Template+" "+f.Kind+" "+f.Name)
		}
		for _, e := range res.Errors {
			errs = append(errs, e.String())
		}
	})
	t.Logf("peak heap above the baseline: %d MiB", peak>>20)
	require.Empty(t, errs)
	require.Equal(t, []string{"app/templates/big.yaml Ingress big", "app/templates/cron.yaml CronJob first"}, findings)
	require.Less(t, peak, uint64(40<<20), "peak heap %d MiB", peak>>20)
}
