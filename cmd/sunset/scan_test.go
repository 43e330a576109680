package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const scanRepo = "../../scan/testdata/repo"

// The exit codes of `sunset scan`, as CI pipelines see them.
func TestScanExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		wantErr  string
	}{
		{name: "removed", args: []string{scanRepo + "/apps/removed.yaml"}, wantCode: 3},
		{name: "deprecated only", args: []string{scanRepo + "/apps/deprecated.yaml"}, wantCode: 2},
		{name: "deprecated only, not an error", args: []string{"--warnings-as-errors=false", scanRepo + "/apps/deprecated.yaml"}, wantCode: 0},
		{name: "safe", args: []string{scanRepo + "/apps/applied.yaml"}, wantCode: 0},
		{name: "stdin", args: []string{"-"}, stdin: "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: x}\n", wantCode: 3},
		{name: "unparsable file", args: []string{"../../scan/testdata/broken/bad.yaml", scanRepo + "/apps/removed.yaml"}, wantCode: 1},
		{name: "unrenderable chart", args: []string{"../../scan/testdata/broken/badchart"}, wantCode: 1},
		{name: "unknown target", args: []string{"--target-version", "1.99", scanRepo}, wantCode: 1,
			wantErr: "Error: --target-version 1.99 is past every release this Sunset's catalog knows (the last is 1.43): what 1.99 removes is unknown, so the verdict would be a guess. Give a release up to 1.43, or a newer Sunset\n"},
		{name: "nothing to scan", args: []string{}, wantCode: 1,
			wantErr: "Error: give paths to scan (a directory, files, or - for standard input), or --kubeconfig/--context to scan a cluster\n"},
		{name: "bad format", args: []string{"-o", "xml", scanRepo}, wantCode: 1,
			wantErr: "Error: -o \"xml\" is not one of table, wide, json, yaml, markdown, sarif, junit\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"scan", "--target-version", "1.37"}, tc.args...)
			_, stderr, code := runCLIWith(testNow, tc.stdin, args...)
			require.Equal(t, tc.wantCode, code, stderr)
			if tc.wantErr != "" {
				require.Equal(t, tc.wantErr, stderr)
			}
		})
	}
}

func TestScanTableEndsWithTheVerdict(t *testing.T) {
	stdout, stderr, code := runCLI("scan", "--target-version", "1.37", "--current-version", "1.36", scanRepo+"/apps/removed.yaml", scanRepo+"/apps/already-removed.yml")
	require.Equal(t, 3, code)
	require.Empty(t, stderr)
	require.Equal(t, `ORIGIN                                               KIND                   NAME  API VERSION             STATUS                     REPLACEMENT
../../scan/testdata/repo/apps/already-removed.yml:1  Ingress                shop  extensions/v1beta1      removed in 1.22 (already)  networking.k8s.io/v1 Ingress
../../scan/testdata/repo/apps/removed.yaml:2         VolumeAttributesClass  gold  storage.k8s.io/v1beta1  removed in 1.37            storage.k8s.io/v1 VolumeAttributesClass
NOT SAFE to upgrade to 1.37: 2 objects use APIs removed in or before 1.37.
`, stdout)
}

// `sunset check --scan` gives one verdict over traffic and scan: the
// traffic of cluster default is safe at 1.36, the manifests decide.
func TestCheckJoinsTrafficAndScan(t *testing.T) {
	url, _, _ := fixture(t)
	check := func(args ...string) (string, string, int) {
		return runCLI(append([]string{"check", "--server", url, "--target-version", "1.36", "--cluster", "default"}, args...)...)
	}

	stdout, stderr, code := check("--scan", scanRepo+"/apps/already-removed.yml")
	require.Equal(t, 3, code, stderr)
	require.Empty(t, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Equal(t, []string{
		"Safe to upgrade to 1.36: no API removed in or before it was requested in the last 24h, system users excluded; 5 deprecated APIs were requested.",
		"ORIGIN                                               KIND     NAME  API VERSION         STATUS           REPLACEMENT",
		"../../scan/testdata/repo/apps/already-removed.yml:1  Ingress  shop  extensions/v1beta1  removed in 1.22  networking.k8s.io/v1 Ingress",
		"NOT SAFE to upgrade to 1.36: 1 object uses APIs removed in or before 1.36.",
	}, lines[len(lines)-4:])

	_, stderr, code = check("--scan", scanRepo+"/apps/applied.yaml")
	require.Equal(t, 0, code, stderr)

	_, stderr, code = check("--scan", "../../scan/testdata/broken/bad.yaml")
	require.Equal(t, 1, code)
	require.Equal(t, "Error: ../../scan/testdata/broken/bad.yaml: not YAML or JSON: yaml: line 3: did not find expected ',' or ']'\n", stderr)

	stdout, _, code = check("--scan", scanRepo, "--set", "legacyPDB=true", "-o", "json")
	require.Equal(t, 3, code)
	var res struct {
		ExitCode int `json:"exitCode"`
		Scan     struct {
			Findings []struct{ Severity string } `json:"findings"`
		} `json:"scan"`
		ScanVerdict string `json:"scanVerdict"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	require.Equal(t, 3, res.ExitCode)
	require.Len(t, res.Scan.Findings, 8)
	require.Equal(t, "NOT SAFE to upgrade to 1.36: 5 objects use APIs removed in or before 1.36.", res.ScanVerdict)
}

// scan --config reads the server's keys as the server spells them:
// field-rules, not fieldRules, which a config file may not hold.
func TestScanConfigNamesItsKeysAsTheConfigFile(t *testing.T) {
	require.Equal(t, map[string]string{"config": "a server config file, for its catalog.extra and field-rules"}, flagHelp(newScanCommand(console{}), "config"))
}
