package scan_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/report"
)

// A scan published by one workload is what the server reads: the result
// and when it ended. Publishing takes get and update on that one
// ConfigMap, reading takes get (the grants the manifests give,
// test/scan_rbac_test.go), and other keys of the ConfigMap stay.
func TestPublishedScanRoundTrips(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sunset", Name: "sunset-cluster-scan"},
		Data: map[string]string{"note": "kept"}})
	cms := kube.CoreV1().ConfigMaps("sunset")

	_, _, ok, err := scan.ReadPublished(ctx, cms, "sunset-cluster-scan")
	require.NoError(t, err)
	require.False(t, ok, "nothing published yet")

	res := report.Result{TargetVersion: "1.40", CurrentVersion: "1.36",
		Findings: []report.Finding{{Severity: catalog.StateRemoved, Rule: report.RuleRemovedAPI, APIVersion: "policy/v1beta1", Kind: "PodDisruptionBudget",
			Name: "web", Namespace: "shop", RemovedIn: "1.25", DeprecatedIn: "1.21", Message: "m", Origin: report.Origin{Release: "shop/web", Revision: 3, Template: "t.yaml"}}},
		NotScanned: []report.NotScanned{{Resource: "secrets", Namespace: "vault", Reason: "forbidden"}}}
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	kube.ClearActions()
	require.NoError(t, scan.Publish(ctx, cms, "sunset-cluster-scan", res, at))
	require.Equal(t, []string{"get", "update"}, verbs(kube.Actions()))

	kube.ClearActions()
	got, gotAt, ok, err := scan.ReadPublished(ctx, cms, "sunset-cluster-scan")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, at, gotAt.UTC())
	require.Equal(t, res.Findings, got.Findings)
	require.Equal(t, res.NotScanned, got.NotScanned)
	require.Equal(t, []string{"get"}, verbs(kube.Actions()))
	cm, err := cms.Get(ctx, "sunset-cluster-scan", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "kept", cm.Data["note"])

	// The ConfigMap must exist: the scanner may not create it.
	err = scan.Publish(ctx, cms, "missing", res, at)
	require.ErrorContains(t, err, "missing")
}

func verbs(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		out = append(out, a.GetVerb())
	}
	return out
}

// Whoever may update the ConfigMap writes what the server reads, so a
// published scan is bounded and checked: junk, a gzip bomb and a body
// without its time are errors, and the last good scan stays.
func TestPublishedScanRefusesJunk(t *testing.T) {
	ctx := context.Background()
	bomb := func() []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zeros := make([]byte, 1<<20)
		for range 80 {
			_, _ = zw.Write(zeros)
		}
		require.NoError(t, zw.Close())
		return b.Bytes()
	}
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(s))
		require.NoError(t, zw.Close())
		return b.Bytes()
	}
	for name, raw := range map[string][]byte{
		"not gzip":      []byte("{}"),
		"a gzip bomb":   bomb(),
		"not JSON":      gz("<xml/>"),
		"no scannedAt":  gz(`{"result":{"findings":[]}}`),
		"a wrong shape": gz(`{"scannedAt":"2026-05-01T12:00:00Z","result":{"findings":"all"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sunset", Name: "scan"},
				BinaryData: map[string][]byte{scan.PublishedKey: raw}})
			_, _, ok, err := scan.ReadPublished(ctx, kube.CoreV1().ConfigMaps("sunset"), "scan")
			require.Error(t, err, name)
			require.False(t, ok, name)
		})
	}
}

// The server reading a published scan keeps it, with the metrics of its
// own scan, the last success being when the scan ended.
func TestNewPublishedKeepsTheLatest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sunset", Name: "scan"}})
	cms := kube.CoreV1().ConfigMaps("sunset")
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, scan.Publish(ctx, cms, "scan", report.Result{TargetVersion: "1.40",
		Findings: []report.Finding{{Severity: catalog.StateDeprecated, Rule: report.RuleDeprecatedAPI, APIVersion: "v1", Kind: "Endpoints", DeprecatedIn: "1.33"}}}, at))
	reg := prometheus.NewRegistry()
	p, err := scan.NewPublished(cms, "scan", time.Hour, reg, zerolog.Nop(), time.Now)
	require.NoError(t, err)
	go func() { _ = p.Run(ctx) }()
	require.Eventually(t, func() bool { _, _, _, ok := p.Latest(); return ok }, 10*time.Second, 10*time.Millisecond)
	res, gotAt, lastErr, _ := p.Latest()
	require.NoError(t, lastErr)
	require.Equal(t, at, gotAt.UTC())
	require.Len(t, res.Findings, 1)
	require.Equal(t, float64(at.Unix()), gaugeValue(t, reg, "sunset_scan_last_success_timestamp_seconds"))
}

// gaugeValue is the value of the gauge name, without labels, in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
