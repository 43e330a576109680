package scan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/internal/testutil/golden"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/helmchart"
	"github.com/kube-sunset/sunset/scan/report"
)

const repo = "testdata/repo"

func judge(t *testing.T, target, current string) scan.Judge {
	t.Helper()
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	rules, err := fieldrule.New(nil)
	require.NoError(t, err)
	j := scan.Judge{Catalog: cat, Fields: rules, Target: catalog.MustParseRelease(target)}
	if current != "" {
		j.Current = catalog.MustParseRelease(current)
	}
	return j
}

func scanRepo(t *testing.T, set ...string) report.Result {
	t.Helper()
	res := scan.Files{Judge: judge(t, "1.37", "1.36"), Charts: helmchart.Renderer{Set: set}}.Scan(context.Background(), []string{repo})
	res.TargetVersion = "1.37"
	return res
}

// expectedBySeverity counts the expect.sunset.dev/finding labels in the
// fixtures with a regular expression, apart from the scanner: the files a
// scan reads (hidden directories skipped) and the chart's templates.
func expectedBySeverity(t *testing.T) map[string]int {
	t.Helper()
	label := regexp.MustCompile(`"?expect\.sunset\.dev/finding"?:\s*"?(removed|deprecated)`)
	want := map[string]int{}
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !regexp.MustCompile(`\.(ya?ml|json)$`).MatchString(p) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range label.FindAllStringSubmatch(string(b), -1) {
			want[m[1]]++
		}
		return nil
	})
	require.NoError(t, err)
	return want
}

func TestScanFindsWhatTheFixturesExpect(t *testing.T) {
	res := scanRepo(t, "legacyPDB=true")
	require.Empty(t, res.Errors)
	want := expectedBySeverity(t)
	require.Equal(t, map[string]int{"removed": 6, "deprecated": 2}, want, "the fixtures changed: update this count by hand")
	require.Equal(t, want["removed"], res.Removed())
	require.Equal(t, want["deprecated"], res.Deprecated())
	require.Equal(t, report.Scanned{Files: 7, Kustomizations: 1, Charts: 1, Objects: 15}, res.Scanned)

	// Without the value, the chart renders policy/v1: one removed fewer.
	plain := scanRepo(t)
	require.Equal(t, want["removed"]-1, plain.Removed())
	require.Equal(t, want["deprecated"], plain.Deprecated())
}

func TestFindingsNameTheirFileAndLine(t *testing.T) {
	var got []string
	for _, f := range scanRepo(t, "legacyPDB=true").Findings {
		got = append(got, f.Origin.String()+" "+f.Kind+" "+f.Name+" "+f.Status())
	}
	require.Equal(t, []string{
		"testdata/repo/apps/already-removed.yml:1 Ingress shop removed in 1.22",
		"testdata/repo/apps/list.json:11 HorizontalPodAutoscaler shop removed in 1.26",
		"testdata/repo/apps/multi.yaml:19 CronJob monthly-report removed in 1.25",
		"testdata/repo/apps/removed.yaml:2 VolumeAttributesClass gold removed in 1.37",
		"testdata/repo/chart: web/templates/pdb.yaml PodDisruptionBudget release-name-web removed in 1.25",
		"testdata/repo/kustomize: rbac.yaml:6 ClusterRole prod-reader removed in 1.22",
		"testdata/repo/apps/deprecated.yaml:2 Endpoints legacy-endpoints deprecated in 1.33",
		"testdata/repo/apps/deprecated.yaml:12 DeviceClass gpus deprecated, removed in 1.38",
	}, got)
}

func TestAlreadyRemovedNeedsTheCurrentRelease(t *testing.T) {
	withCurrent := scan.Files{Judge: judge(t, "1.37", "1.36")}.Scan(context.Background(), []string{repo + "/apps/removed.yaml", repo + "/apps/already-removed.yml"})
	without := scan.Files{Judge: judge(t, "1.37", "")}.Scan(context.Background(), []string{repo + "/apps/removed.yaml", repo + "/apps/already-removed.yml"})
	already := func(r report.Result) []bool {
		var out []bool
		for _, f := range r.Findings {
			out = append(out, f.AlreadyRemoved)
		}
		return out
	}
	require.Equal(t, []bool{true, false}, already(withCurrent), "extensions/v1beta1 is gone at 1.36; storage.k8s.io/v1beta1 goes at 1.37")
	require.Equal(t, []bool{false, false}, already(without))
}

func TestTargetDecidesSeverity(t *testing.T) {
	for _, tc := range []struct {
		target              string
		removed, deprecated int
	}{
		// extensions Ingress, rbac v1beta1 and batch/v1beta1 CronJob (deprecated
		// in 1.21 itself) are deprecated; nothing is removed before 1.22.
		{"1.21", 0, 3},
		{"1.37", 5, 2},
		{"1.38", 6, 1}, // DeviceClass v1beta1 is removed in 1.38
	} {
		t.Run(tc.target, func(t *testing.T) {
			res := scan.Files{Judge: judge(t, tc.target, ""), Charts: helmchart.Renderer{}}.Scan(context.Background(), []string{repo})
			require.Equal(t, tc.removed, res.Removed(), "target %s", tc.target)
			require.Equal(t, tc.deprecated, res.Deprecated(), "target %s", tc.target)
		})
	}
}

func TestUnreadableInputsAreErrors(t *testing.T) {
	res := scan.Files{Judge: judge(t, "1.37", ""), Charts: helmchart.Renderer{}}.Scan(context.Background(), []string{"testdata/broken", "testdata/nonexistent.yaml"})
	var got []string
	for _, e := range res.Errors {
		got = append(got, e.String())
	}
	require.Equal(t, []string{
		"testdata/broken/bad.yaml: not YAML or JSON: yaml: line 3: did not find expected ',' or ']'",
		"testdata/broken/badchart: rendering: execution error at (bad/templates/cm.yaml:4:26): name is required",
		"testdata/nonexistent.yaml: stat testdata/nonexistent.yaml: no such file or directory",
	}, got)
	require.Equal(t, "INCOMPLETE: 3 inputs could not be read; fix them and scan again.", res.Verdict(false))
}

// Hostile input: each is refused or skipped on its own, and never costs
// the other inputs their findings.
// A scan given no ChartRenderer reports a chart as an input it could not
// read, rather than as one without findings.
func TestChartsNeedARenderer(t *testing.T) {
	res := scan.Files{Judge: judge(t, "1.37", "")}.Scan(context.Background(), []string{repo + "/chart"})
	require.Equal(t, []report.InputError{{Path: repo + "/chart", Err: "charts are not rendered by this scan"}}, res.Errors)
	require.Zero(t, res.Scanned.Charts)
}

func TestHostileManifests(t *testing.T) {
	j := judge(t, "1.37", "")
	for name, tc := range map[string]struct {
		input   string
		wantErr string
		objects int
	}{
		"alias bomb": {input: "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n" +
			"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n" +
			"g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\napiVersion: v1\nkind: Endpoints\n", objects: 1},
		"apiVersion not a string":  {input: "apiVersion: [extensions/v1beta1]\nkind: Ingress\n"},
		"unknown version":          {input: "apiVersion: extensions/v999\nkind: Ingress\n", objects: 1},
		"kind List without items":  {input: "apiVersion: v1\nkind: List\n", objects: 1},
		"a scalar document":        {input: "just text\n"},
		"tabs are not YAML":        {input: "apiVersion: v1\n\tkind: Endpoints\n", wantErr: "not YAML or JSON: yaml: line 2: found a tab character that violates indentation"},
		"binary":                   {input: "\x00\x01\x02", wantErr: "not YAML or JSON: yaml: control characters are not allowed"},
		"List item not an object":  {input: "apiVersion: v1\nkind: List\nitems: [1, x, [y]]\n"},
		"deeply nested flow":       {input: strings.Repeat("[", 20000) + strings.Repeat("]", 20000), wantErr: "not YAML or JSON: yaml: exceeded max depth of 10000"},
		"field rule body with map": {input: "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {? [a] : b}\n", objects: 1},
	} {
		t.Run(name, func(t *testing.T) {
			res := scan.Files{Judge: j, Stdin: strings.NewReader(tc.input)}.Scan(context.Background(), []string{"-", repo + "/apps/removed.yaml"})
			require.Equal(t, 1, res.Removed(), "the other file keeps its finding")
			var errs []string
			for _, e := range res.Errors {
				errs = append(errs, e.Err)
			}
			if tc.wantErr == "" {
				require.Empty(t, errs)
			} else {
				require.Equal(t, []string{tc.wantErr}, errs)
			}
			require.Equal(t, tc.objects+1, res.Scanned.Objects)
		})
	}
}

func TestOversizedStdinIsRefused(t *testing.T) {
	big := io.LimitReader(repeatReader('#'), scan.MaxFileSize+1)
	res := scan.Files{Judge: judge(t, "1.37", ""), Stdin: big}.Scan(context.Background(), []string{"-"})
	require.Equal(t, []report.InputError{{Path: "-", Err: "larger than 64 MiB: split it, or scan the directory it came from"}}, res.Errors)
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

func TestOutputGoldens(t *testing.T) {
	res := scanRepo(t, "legacyPDB=true")
	res.NotScanned = []report.NotScanned{{Resource: "secrets", Namespace: "payments", Reason: `secrets is forbidden: User "dev" cannot list resource "secrets" in API group "" in the namespace "payments"`}}
	for _, format := range report.Formats {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, res.Write(&b, format, "test", func(s string) string { return s }))
			golden.Assert(t, filepath.Join("testdata", "golden", "repo."+format), b.Bytes())
		})
	}
	// Every finding of the fixtures comes from the built-in catalog, and
	// each golden that carries a source says so once per finding: counted
	// apart from the writers, against the fixtures' labels.
	want := 0
	for _, n := range expectedBySeverity(t) {
		want += n
	}
	for format, needle := range map[string]string{"json": `"source": "catalog"`, "yaml": "source: catalog", "sarif": `"source": "catalog"`} {
		t.Run(format, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "golden", "repo."+format))
			require.NoError(t, err)
			require.Equal(t, want, bytes.Count(b, []byte(needle)), format)
		})
	}
}

func TestSARIFIsValidAgainstTheSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	f, err := os.Open("testdata/sarif/sarif-schema-2.1.0.json")
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	require.NoError(t, c.AddResource("sarif-schema-2.1.0.json", doc))
	schema, err := c.Compile("sarif-schema-2.1.0.json")
	require.NoError(t, err)

	res := scanRepo(t, "legacyPDB=true")
	res.NotScanned = []report.NotScanned{{Resource: "secrets", Namespace: "payments", Reason: "forbidden"}}
	res.Findings = append(res.Findings, report.Finding{Severity: "deprecated", Rule: report.RuleCRDStoredVersion, APIVersion: "example.com/v1beta1", Kind: "Widget",
		Name: "widgets.example.com", Message: "m", Origin: report.Origin{Object: "customresourcedefinitions/widgets.example.com"}})
	var b bytes.Buffer
	require.NoError(t, res.Write(&b, "sarif", "test", nil))
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	require.NoError(t, schema.Validate(v))

	// And the schema is not so loose that anything passes.
	bad, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"version":"2.1.0","runs":[{"tool":{"driver":{}}}]}`))
	require.NoError(t, err)
	require.Error(t, schema.Validate(bad), "a driver without a name is not SARIF")

	var log struct {
		Runs []struct {
			Results []struct{ Level string }
		}
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &log))
	levels := map[string]int{}
	for _, r := range log.Runs[0].Results {
		levels[r.Level]++
	}
	require.Equal(t, map[string]int{"error": 6, "warning": 3}, levels)
}

func TestJUnitCountsFailures(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, scanRepo(t, "legacyPDB=true").Write(&b, "junit", "test", nil))
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
	}
	require.NoError(t, xml.Unmarshal(b.Bytes(), &doc))
	require.Equal(t, 8, doc.Tests)
	require.Equal(t, 6, doc.Failures)
	require.Equal(t, 0, doc.Errors)
}

// A result scanned against the horizon narrows to any nearer target as a
// scan for that target would judge it.
func TestResultAtANearerTarget(t *testing.T) {
	far := scan.Files{Judge: judge(t, "1.43", "1.36"), Charts: helmchart.Renderer{Set: []string{"legacyPDB=true"}}}.Scan(context.Background(), []string{repo})
	far.Findings = append(far.Findings, report.Finding{Severity: "deprecated", Rule: report.RuleCRDStoredVersion, Kind: "Gizmo", Origin: report.Origin{Object: "crd"}})
	for _, target := range []string{"1.21", "1.36", "1.37", "1.38"} {
		t.Run(target, func(t *testing.T) {
			near := scan.Files{Judge: judge(t, target, "1.36"), Charts: helmchart.Renderer{Set: []string{"legacyPDB=true"}, KubeVersion: "1.43"}}.Scan(context.Background(), []string{repo})
			got := far.At(catalog.MustParseRelease(target))
			require.Equal(t, near.Findings, got.Findings[:len(got.Findings)-1], "target %s", target)
			require.Equal(t, "Gizmo", got.Findings[len(got.Findings)-1].Kind, "a finding with no release stays at any target")
		})
	}
}
