package gate

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/gate/kubeversion"
	"github.com/kube-sunset/sunset/verdict"
)

var now = time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)

// checker answers with res and remembers what it was asked.
type checker struct {
	res   sunsetv1.CheckResult
	err   error
	query sunsetv1.Query
	opts  verdict.CheckOptions
	calls int
}

func (c *checker) UpgradeCheck(q sunsetv1.Query, o verdict.CheckOptions) (sunsetv1.UpgradeCheck, error) {
	c.calls++
	c.query, c.opts = q, o
	return sunsetv1.UpgradeCheck{Status: c.res}, c.err
}

// listener has heard the clusters it holds.
type listener map[string]Hearing

func (l listener) Heard(cluster string) (Hearing, error) {
	if h, ok := l[cluster]; ok {
		h.Known = true
		return h, nil
	}
	return Hearing{}, nil
}

func version(t *testing.T, s string) kubeversion.Version {
	t.Helper()
	v, err := kubeversion.Parse(s)
	require.NoError(t, err)
	return v
}

// removedResult is the verdict of the default cluster of app's
// postCheckFixture at 1.37, a removed API in use.
var removedResult = sunsetv1.CheckResult{TargetVersion: "1.37", Since: "24h", ExcludeSystem: true, ExitCode: sunsetv1.ExitCodeRemoved,
	Message: "NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 24h, system users excluded.",
	Findings: []sunsetv1.Finding{
		{Name: "volumeattributesclasses.v1beta1.storage.k8s.io", Severity: sunsetv1.SeverityRemoved, RemovedIn: "1.37", Requests: 1, ClientCount: 1, Clients: []string{"carol"},
			Warning: "storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass"},
		{Name: "cronjobs.v1beta1.batch", Severity: sunsetv1.SeverityRemoved, RemovedIn: "1.25", AlreadyRemoved: true, Requests: 2, ClientCount: 5,
			Clients: []string{"a", "b", "c", "d", "e"}, Warning: "batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob"},
		{Name: "endpoints.v1", Severity: sunsetv1.SeverityDeprecated, Requests: 8, ClientCount: 2, Clients: []string{"alice", "bob"},
			Warning: "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"},
	}}

func newGate(t *testing.T, c Checker, l Listener, o Options) (*Gate, *prometheus.Registry, *bytes.Buffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	o.Checker, o.Listener, o.Registerer, o.Logger = c, l, reg, zerolog.New(&logs)
	o.Now = func() time.Time { return now }
	return New(o), reg, &logs
}

func reviews(t *testing.T, reg *prometheus.Registry, source Source, o Outcome) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "sunset_gate_reviews_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == string(source) && labels["decision"] == string(o) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s/%s", source, o)
	return 0
}

func prodCluster(t *testing.T, from, to string, annotations map[string]string) Request {
	return Request{Source: SourceAdmission, Kind: "Cluster", From: version(t, from), To: version(t, to), User: "alice@example.com",
		Meta: Meta{Namespace: "fleet", Name: "prod", Annotations: annotations}}
}

func TestRefusedNamesRemovedAPIsCallersAndOverride(t *testing.T) {
	c := &checker{res: removedResult}
	g, reg, _ := newGate(t, c, listener{"prod": {LastHeard: now.Add(-time.Minute)}}, Options{CleanFor: 6 * time.Hour})
	d, err := g.Decide(prodCluster(t, "v1.34.2", "v1.37.0", nil))
	require.NoError(t, err)
	require.Equal(t, Decision{Outcome: Refused, Cluster: "prod", Message: `sunset: the upgrade of cluster prod from 1.34 to 1.37 is refused: NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 24h, system users excluded.
- storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass: 1 request in the last 24h by carol
- batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob: 2 requests in the last 24h by a, b, c and 2 more (already removed: these calls fail today)
To upgrade anyway, annotate Cluster fleet/prod with sunset.dev/upgrade-override="<reason>".`}, d)
	// The verdict upgradechecks give for the cluster and the target.
	require.Equal(t, sunsetv1.Query{Cluster: "prod"}, c.query)
	require.Equal(t, verdict.CheckOptions{Target: version(t, "1.37").Release(), From: version(t, "1.34").Release(), Since: 24 * time.Hour,
		CleanFor: 6 * time.Hour, ExcludeSystem: true}, c.opts)
	require.Equal(t, 1.0, reviews(t, reg, SourceAdmission, Refused))
	require.Equal(t, 0.0, reviews(t, reg, SourceCAPI, Refused))
}

// A refusal names the callers that count, with their user agents and
// when last seen; callers stopped or exempted, and APIs every caller of
// which is, are left out.
func TestRefusalNamesCallersThatCount(t *testing.T) {
	res := removedResult
	vac := res.Findings[0]
	vac.ClientCount = 3
	vac.Callers = []sunsetv1.Caller{
		{UserName: "carol", UserAgents: []string{"terraform/1.9.0", "kubectl/v1.36.0"}, LastSeen: time.Date(2026, 11, 21, 7, 0, 0, 0, time.UTC)},
		{UserName: "dave", LastSeen: time.Date(2026, 11, 20, 7, 0, 0, 0, time.UTC), Stopped: true},
		{UserName: "erin", Exemption: &sunsetv1.Exemption{API: vac.Name, UserName: "erin", Reason: "vendor", Expires: now.Add(time.Hour)}},
		{UserName: "frank"},
	}
	accepted := res.Findings[1]
	accepted.Accepted = true
	res.Findings = []sunsetv1.Finding{vac, accepted}
	g, _, _ := newGate(t, &checker{res: res}, listener{"prod": {LastHeard: now}}, Options{})
	d, err := g.Decide(prodCluster(t, "1.36", "1.37", nil))
	require.NoError(t, err)
	require.Equal(t, `sunset: the upgrade of cluster prod from 1.36 to 1.37 is refused: NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 24h, system users excluded.
- storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass: 1 request in the last 24h by carol (terraform/1.9.0, kubectl/v1.36.0; last seen 2026-11-21 07:00 UTC), frank
To upgrade anyway, annotate Cluster fleet/prod with sunset.dev/upgrade-override="<reason>".`, d.Message)

	// Allowed: the accepted API is said to be.
	res.ExitCode, res.Findings = sunsetv1.ExitCodeSafe, []sunsetv1.Finding{accepted}
	g, _, _ = newGate(t, &checker{res: res}, listener{"prod": {LastHeard: now}}, Options{})
	d, err = g.Decide(prodCluster(t, "1.36", "1.37", nil))
	require.NoError(t, err)
	require.Equal(t, []string{
		"sunset: batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob: every caller has stopped or is exempted",
		"sunset: allowed: nothing removed by 1.37 is still called"}, d.Warnings)
}

func TestOverrideIsLoggedAndCounted(t *testing.T) {
	c := &checker{res: removedResult}
	rec := &recorder{}
	g, reg, logs := newGate(t, c, listener{"prod": {LastHeard: now}}, Options{Recorder: rec})
	d, err := g.Decide(prodCluster(t, "1.36", "1.37", map[string]string{OverrideAnnotation: " INC-4711: moved next week "}))
	require.NoError(t, err)
	require.Equal(t, Overridden, d.Outcome)
	require.True(t, d.Allowed)
	require.Empty(t, d.Message)
	require.Len(t, d.Warnings, 1)
	require.Contains(t, d.Warnings[0], `sunset: allowed by sunset.dev/upgrade-override "INC-4711: moved next week"; without it: sunset: the upgrade of cluster prod from 1.36 to 1.37 is refused`)
	require.Equal(t, 1.0, reviews(t, reg, SourceAdmission, Overridden))
	require.Equal(t, 0.0, reviews(t, reg, SourceAdmission, Refused))
	require.Contains(t, logs.String(), `"source":"admission","kind":"Cluster","namespace":"fleet","name":"prod","cluster":"prod","from":"1.36","to":"1.37","user":"alice@example.com","reason":"INC-4711: moved next week"`)
	require.Contains(t, logs.String(), `"message":"upgrade allowed by override"`)
	require.Equal(t, []OverrideRecord{{Time: now, Source: SourceAdmission, Cluster: "prod", Kind: "Cluster", Meta: Meta{Namespace: "fleet", Name: "prod"},
		User: "alice@example.com", Reason: "INC-4711: moved next week", From: version(t, "1.36"), To: version(t, "1.37")}}, rec.kept)

	// An empty reason is no override.
	d, err = g.Decide(prodCluster(t, "1.36", "1.37", map[string]string{OverrideAnnotation: "  "}))
	require.NoError(t, err)
	require.Equal(t, Refused, d.Outcome)
	require.False(t, d.Allowed)
	require.Len(t, rec.kept, 1)

	// A dry run is logged, not kept.
	dry := prodCluster(t, "1.36", "1.37", map[string]string{OverrideAnnotation: "trying"})
	dry.DryRun = true
	d, err = g.Decide(dry)
	require.NoError(t, err)
	require.Equal(t, Overridden, d.Outcome)
	require.Len(t, rec.kept, 1)
	require.Contains(t, logs.String(), `"reason":"trying","dry_run":true`)

	// A reason is kept and logged up to 1 KiB.
	long := strings.Repeat("é", 600)
	_, err = g.Decide(prodCluster(t, "1.36", "1.37", map[string]string{OverrideAnnotation: long}))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("é", 512)+"…", rec.kept[1].Reason)
}

// recorder keeps what it is given.
type recorder struct{ kept []OverrideRecord }

func (r *recorder) RecordOverride(o OverrideRecord) error {
	r.kept = append(r.kept, o)
	return nil
}

func TestOnlyAMinorRaiseIsJudged(t *testing.T) {
	c := &checker{res: removedResult}
	g, reg, _ := newGate(t, c, listener{"prod": {LastHeard: now}}, Options{})
	for _, tc := range [][2]string{{"v1.36.3", "v1.36.4"}, {"v1.37.0", "v1.36.9"}, {"1.36", "1.36.0-eks-1"}} {
		d, err := g.Decide(prodCluster(t, tc[0], tc[1], nil))
		require.NoError(t, err)
		require.Equal(t, Decision{Outcome: Allowed, Allowed: true}, d, tc)
	}
	require.Equal(t, 0, c.calls, "the verdict is not asked")
	require.Equal(t, 3.0, reviews(t, reg, SourceAdmission, Allowed))
}

func TestDeprecatedOnlyWarns(t *testing.T) {
	res := removedResult
	res.ExitCode, res.Findings = sunsetv1.ExitCodeSafe, res.Findings[2:]
	g, reg, _ := newGate(t, &checker{res: res}, listener{"prod": {LastHeard: now}}, Options{})
	d, err := g.Decide(Request{Source: SourceCAPI, Kind: "Cluster", From: version(t, "1.36"), To: version(t, "1.37"), Meta: Meta{Namespace: "fleet", Name: "prod"}})
	require.NoError(t, err)
	require.Equal(t, Decision{Outcome: Warned, Allowed: true, Cluster: "prod", Warnings: []string{
		"sunset: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice: 8 requests in the last 24h by alice, bob",
		"sunset: allowed: nothing removed by 1.37 is still called",
	}}, d)
	require.Equal(t, 1.0, reviews(t, reg, SourceCAPI, Warned))

	// Clean: allowed without a word.
	g, _, _ = newGate(t, &checker{res: sunsetv1.CheckResult{ExitCode: sunsetv1.ExitCodeSafe}}, listener{"prod": {LastHeard: now}}, Options{})
	d, err = g.Decide(prodCluster(t, "1.36", "1.37", nil))
	require.NoError(t, err)
	require.Equal(t, Decision{Outcome: Allowed, Allowed: true, Cluster: "prod"}, d)
}

func TestUnknownClusters(t *testing.T) {
	c := &checker{res: removedResult}
	heard := listener{"stale": {LastHeard: now.Add(-2*time.Hour - 90*time.Second)}, "blind": {LastHeard: now, ReadsMissing: true}, "fresh": {LastHeard: now.Add(-2 * time.Hour)}}
	g, reg, _ := newGate(t, c, heard, Options{})
	req := func(cluster string) Request {
		r := prodCluster(t, "1.36", "1.37", nil)
		r.Meta.Name = cluster
		return r
	}

	d, err := g.Decide(req("never"))
	require.NoError(t, err)
	require.Equal(t, Decision{Outcome: Unknown, Allowed: true, Cluster: "never", Warnings: []string{
		`sunset: the upgrade of cluster never from 1.36 to 1.37 was not judged: Sunset has never heard of cluster "never". Name the cluster Sunset counts with the label sunset.dev/cluster on Cluster fleet/never, or in gate.clusters`}}, d)

	d, err = g.Decide(req("stale"))
	require.NoError(t, err)
	require.Equal(t, Decision{Outcome: Unknown, Allowed: true, Cluster: "stale", Warnings: []string{
		"sunset: the upgrade of cluster stale from 1.36 to 1.37 was not judged: Sunset has heard nothing from cluster stale for 2h1m (gate.staleAfter is 2h)"}}, d)

	d, err = g.Decide(req("blind"))
	require.NoError(t, err)
	require.Equal(t, Decision{Outcome: Unknown, Allowed: true, Cluster: "blind", Warnings: []string{
		"sunset: the upgrade of cluster blind from 1.36 to 1.37 was not judged: cluster blind sends no get, list or watch in its audit events, so deprecated reads cannot be seen"}}, d)
	require.Equal(t, 0, c.calls)
	require.Equal(t, 3.0, reviews(t, reg, SourceAdmission, Unknown))

	// Silent for exactly staleAfter is not yet stale.
	d, err = g.Decide(req("fresh"))
	require.NoError(t, err)
	require.Equal(t, Refused, d.Outcome)

	g, reg, _ = newGate(t, c, heard, Options{WhenUnknown: Refuse})
	d, err = g.Decide(req("stale"))
	require.NoError(t, err)
	require.Equal(t, Decision{Outcome: Unknown, Cluster: "stale", Message: `sunset: the upgrade of cluster stale from 1.36 to 1.37 is refused: it cannot be judged, Sunset has heard nothing from cluster stale for 2h1m (gate.staleAfter is 2h) (gate.whenUnknown is refuse). To upgrade anyway, annotate Cluster fleet/stale with sunset.dev/upgrade-override="<reason>".`}, d)
	// Never heard stays allowed whatever whenUnknown says.
	d, err = g.Decide(req("never"))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, 2.0, reviews(t, reg, SourceAdmission, Unknown))
}

func TestVerdictErrorIsCounted(t *testing.T) {
	g, reg, _ := newGate(t, &checker{err: errors.New("store: closed")}, listener{"prod": {LastHeard: now}}, Options{})
	_, err := g.Decide(prodCluster(t, "1.36", "1.37", nil))
	require.EqualError(t, err, "the verdict for cluster prod at 1.37: store: closed")
	require.Equal(t, 1.0, reviews(t, reg, SourceAdmission, Error))
	require.Equal(t, float64(now.Unix()), testutil.ToFloat64(g.metrics.lastError))
}

func TestClusterForPrecedence(t *testing.T) {
	clusters := map[string]string{"capi-system/prod-eu": "prod", "global": "shared"}
	for _, tc := range []struct {
		name string
		meta Meta
		want string
	}{
		{"label first", Meta{Namespace: "capi-system", Name: "prod-eu", Labels: map[string]string{ClusterLabel: "by-label"}, Annotations: map[string]string{ClusterLabel: "by-annotation"}}, "by-label"},
		{"then annotation", Meta{Namespace: "capi-system", Name: "prod-eu", Annotations: map[string]string{ClusterLabel: "by-annotation"}}, "by-annotation"},
		{"then gate.clusters", Meta{Namespace: "capi-system", Name: "prod-eu"}, "prod"},
		{"a cluster-scoped object by name", Meta{Name: "global"}, "shared"},
		{"an empty label does not count", Meta{Namespace: "capi-system", Name: "prod-eu", Labels: map[string]string{ClusterLabel: " "}}, "prod"},
		{"else the name", Meta{Namespace: "other", Name: "prod-eu"}, "prod-eu"},
		{"a control plane stands for its Cluster API cluster", Meta{Namespace: "other", Name: "prod-eu-control-plane",
			Labels: map[string]string{CAPIClusterNameLabel: "prod-eu"}}, "prod-eu"},
		{"and is mapped by its cluster's key", Meta{Namespace: "capi-system", Name: "prod-eu-control-plane",
			Labels: map[string]string{CAPIClusterNameLabel: "prod-eu"}}, "prod"},
		{"the label still comes first", Meta{Namespace: "capi-system", Name: "prod-eu-control-plane",
			Labels: map[string]string{CAPIClusterNameLabel: "prod-eu", ClusterLabel: "by-label"}}, "by-label"},
	} {
		require.Equal(t, tc.want, ClusterFor(tc.meta, clusters), tc.name)
	}
}

func TestKinds(t *testing.T) {
	k, err := NewKinds([]Kind{{Group: "infrastructure.example.com", Kind: "ManagedControlPlane", Path: "spec.kubernetesVersion"},
		{Group: "cluster.x-k8s.io", Kind: "Cluster", Path: "spec.version"}})
	require.NoError(t, err)
	for _, tc := range []struct{ group, kind, path string }{
		{"controlplane.cluster.x-k8s.io", "KubeadmControlPlane", "spec.version"},
		{"eks.services.k8s.aws", "Cluster", "spec.version"},
		{"containerservice.azure.com", "ManagedCluster", "spec.kubernetesVersion"},
		{"container.cnrm.cloud.google.com", "ContainerCluster", "spec.minMasterVersion"},
		{"eks.aws.upbound.io", "Cluster", "spec.forProvider.version"},
		{"provisioning.cattle.io", "Cluster", "spec.kubernetesVersion"},
		{"infrastructure.example.com", "ManagedControlPlane", "spec.kubernetesVersion"},
		{"cluster.x-k8s.io", "Cluster", "spec.version"}, // replaced
	} {
		p, ok := k.Path(tc.group, tc.kind)
		require.True(t, ok, tc.kind)
		require.Equal(t, tc.path, p, tc.kind)
	}
	_, ok := k.Path("apps", "Deployment")
	require.False(t, ok)
	require.Len(t, BuiltinKinds(), 7)

	for _, tc := range []struct {
		kind Kind
		err  string
	}{
		{Kind{Group: "g", Path: "spec.version"}, "entry 0: kind is empty: name the kind, such as Cluster"},
		{Kind{Group: "g", Kind: "K"}, "entry 0: K: path is empty: name the version field, such as spec.version"},
		{Kind{Group: "g", Kind: "K", Path: "spec..version"}, `entry 0: K: path "spec..version" has an empty field: write it in dots, such as spec.version`},
	} {
		_, err := NewKinds([]Kind{tc.kind})
		require.EqualError(t, err, tc.err)
	}
}

func TestVersionAt(t *testing.T) {
	obj := []byte(`{"spec":{"topology":{"version":"v1.36.3","class":"quick-start"},"paused":null,"replicas":3}}`)
	v, found, err := VersionAt(obj, "spec.topology.version")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v1.36.3", v)
	for _, path := range []string{"spec.version", "status.version", "spec.paused"} {
		_, found, err = VersionAt(obj, path)
		require.NoError(t, err, path)
		require.False(t, found, path)
	}
	_, _, err = VersionAt(obj, "spec.replicas")
	require.EqualError(t, err, "spec.replicas holds 3, not a version string")
	_, _, err = VersionAt(obj, "spec.topology.version.major")
	require.EqualError(t, err, "spec.topology.version.major: the object is not JSON objects down to the field")
}
