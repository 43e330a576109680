package app_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/parts"
)

// The config's exemptions accept carol's calls to the API 1.37 removes
// until they expire; the server's clock is 2026-11-21T19:50:00Z.
func TestExemptionsFromTheConfig(t *testing.T) {
	cfg := testConfig(t)
	cfg.Exemptions = []config.ExemptionConfig{
		{API: "volumeattributesclasses.v1beta1.storage.k8s.io", User: "carol", Reason: "terraform module 4.2 in CHG-7", Expires: "2026-11-22"},
		{API: "cronjobs.v1beta1.batch", UserAgent: "helm/v3.14.0*", Reason: "chart bump", Expires: "2026-11-21T19:50:00Z"},
		{API: "ingresses.v1beta1.extensions", User: "nobody", Reason: "gone", Expires: "2027-01-01"},
	}
	s := start(t, cfg)
	postCheckFixture(s)
	res := getJSON[sunsetv1.UpgradeCheck](t, s, "/apis/sunset.dev/v1/upgradechecks/1.37?since=48h").Status

	vac := res.Findings[1]
	require.Equal(t, "volumeattributesclasses.v1beta1.storage.k8s.io", vac.Name)
	require.True(t, vac.Accepted)
	require.Equal(t, &sunsetv1.Exemption{API: vac.Name, UserName: "carol", Reason: "terraform module 4.2 in CHG-7", Expires: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)},
		vac.Callers[0].Exemption)
	// The CronJob exemption expired at the server's very instant.
	require.False(t, res.Findings[0].Accepted)
	require.Nil(t, res.Findings[0].Callers[0].Exemption)
	require.Equal(t, sunsetv1.ExitCodeRemoved, res.ExitCode)
	require.Len(t, res.Exemptions, 2)
	require.Equal(t, []sunsetv1.Exemption{{API: "cronjobs.v1beta1.batch", UserAgent: "helm/v3.14.0*", Reason: "chart bump", Expires: time.Date(2026, 11, 21, 19, 50, 0, 0, time.UTC)}}, res.ExpiredExemptions)
	require.Equal(t, []sunsetv1.Exemption{{API: "ingresses.v1beta1.extensions", UserName: "nobody", Reason: "gone", Expires: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}}, res.StaleExemptions)
	require.Equal(t, "NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 48h, system users excluded. "+
		"1 API requested not counted: every caller is exempted. 1 exemption matched no request.", res.Message)

	_, body := s.get("/metrics")
	require.Contains(t, string(body), "sunset_exemptions{state=\"active\"} 2\n")
	require.Contains(t, string(body), "sunset_exemptions{state=\"expired\"} 1\n")
	require.Contains(t, string(body), "sunset_exemptions{state=\"stale\"} 1\n")
}

func TestBadExemptionsAreRefused(t *testing.T) {
	cfg := testConfig(t)
	cfg.Exemptions = []config.ExemptionConfig{{API: "cronjobs", Expires: "next week"}}
	require.EqualError(t, cfg.Validate(), "exemptions: [0]: api \"cronjobs\" is not an APIRequestCount name such as cronjobs.v1beta1.batch\n"+
		"[0]: reason is required: say why the calls may go on, and who fixes them\n"+
		"[0]: expires \"next week\" is not an RFC 3339 date (2026-12-31) or time (2026-12-31T18:00:00Z)")
}

// `sunset check --data-dir` applies --config's exemptions: the data
// directory's reader offers them.
func TestDataDirReaderOffersTheConfigsExemptions(t *testing.T) {
	cfg := testConfig(t)
	cfg.Exemptions = []config.ExemptionConfig{{API: "cronjobs.v1beta1.batch", User: "ci", Reason: "CHG-1", Expires: "2026-12-01"}}
	parts, err := parts.Open(cfg, parts.Options{NoStore: true})
	require.NoError(t, err)
	got, err := parts.Reader().CheckExemptions(catalog.MustParseRelease("1.37"))
	require.NoError(t, err)
	require.Equal(t, []sunsetv1.Exemption{{API: "cronjobs.v1beta1.batch", UserName: "ci", Reason: "CHG-1", Expires: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}}, got)
}

// Written unquoted, as docs/cli.md shows, a date or a time in expires is
// a timestamp to the YAML reader: it loads as the same instant.
func TestExemptionExpiresUnquoted(t *testing.T) {
	cfg, err := config.Load(config.Flags(), writeConfig(t, `exemptions:
  - api: cronjobs.v1beta1.batch
    user: ci
    reason: CHG-1
    expires: 2026-12-01
  - api: cronjobs.v1beta1.batch
    user: cd
    reason: CHG-2
    expires: 2026-12-01T18:30:00+02:00
`))
	require.NoError(t, err)
	exemptions, err := config.ParseExemptions(cfg.Exemptions)
	require.NoError(t, err)
	require.Len(t, exemptions, 2)
	require.True(t, exemptions[0].Expires.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)), exemptions[0].Expires)
	require.True(t, exemptions[1].Expires.Equal(time.Date(2026, 12, 1, 16, 30, 0, 0, time.UTC)), exemptions[1].Expires)
}
