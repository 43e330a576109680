package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// The store registers its own metrics, and times each Commit (admission
// counts and requests together) as one group commit.
func TestStoreRegistersItsMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := Open(Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return hour19 }, Registerer: reg})
	require.NoError(t, err)
	defer s.Close()
	adm := AdmissionRequest{ID: "a", Cluster: "c", Hour: hour19,
		Rows: []countkey.AdmissionRow{{Key: countkey.AdmissionKey{Hour: hour19, Cluster: "c", Version: "v1", Resource: "pods"}, Counts: countkey.AdmissionCounts{Requests: 1}}}}
	d, err := s.commitBatch(Batch{Admission: []AdmissionRequest{adm, adm}, Requests: []Request{{ID: "a", Key: countkey.CountKey{Cluster: "c", API: "a.v1",
		Cell: countkey.Cell{Hour: hour19}}}}})
	require.NoError(t, err)
	require.Equal(t, Duplicates{Admission: []bool{false, true}, Requests: []bool{false}, FieldRules: []bool{}}, d)

	families, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	require.Equal(t, []string{
		"sunset_store_clients_overflow_total",
		"sunset_store_clusters_overflow_total",
		"sunset_store_commit_duration_seconds",
		"sunset_store_commit_errors_total",
		"sunset_store_disk_full",
		"sunset_store_disk_reserve_bytes",
		"sunset_store_expired_records_deleted_total",
		"sunset_store_filesystem_free_bytes",
		"sunset_store_filesystem_size_bytes",
		"sunset_store_nodes_overflow_total",
		"sunset_store_size_bytes",
		"sunset_store_writes_refused_total",
	}, names)
	require.Equal(t, uint64(1), histogramCount(t, reg, "sunset_store_commit_duration_seconds"))
	require.Zero(t, testutil.ToFloat64(s.metrics.commitErrors))

	s.readOnly = true
	_, err = s.commitBatch(Batch{Requests: []Request{{ID: "b"}}})
	require.Error(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(s.metrics.commitErrors))
	require.Equal(t, uint64(2), histogramCount(t, reg, "sunset_store_commit_duration_seconds"))
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// sunset_store_size_bytes reads what is on disk: after a commit and a
// reopen (which flushes the memtable into a table), both kinds equal the
// sizes of the files themselves, and neither is zero.
func TestStoreSizeIsWhatIsOnDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Logger: zerolog.Nop(), Now: func() time.Time { return hour19 }})
	require.NoError(t, err)
	_, err = s.commitBatch(Batch{Requests: []Request{{ID: "a", Key: countkey.CountKey{Cluster: "c", API: "a.v1", Cell: countkey.Cell{Hour: hour19}}}}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	reg := prometheus.NewRegistry()
	s, err = Open(Options{Dir: dir, Logger: zerolog.Nop(), Now: func() time.Time { return hour19 }, Registerer: reg})
	require.NoError(t, err)
	defer s.Close()
	onDisk := func(pattern string) float64 {
		files, err := filepath.Glob(filepath.Join(dir, pattern))
		require.NoError(t, err)
		var n int64
		for _, f := range files {
			fi, err := os.Stat(f)
			require.NoError(t, err)
			n += fi.Size()
		}
		return float64(n)
	}
	lsm, vlog := onDisk("*.sst"), onDisk("*.vlog")
	require.NotZero(t, lsm, "no table on disk after a reopen")
	require.NotZero(t, vlog, "no value log on disk")
	require.Equal(t, lsm, gaugeWithKind(t, reg, "lsm"))
	require.Equal(t, vlog, gaugeWithKind(t, reg, "vlog"))
}

func gaugeWithKind(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "sunset_store_size_bytes" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == kind {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no sunset_store_size_bytes{kind=%q}", kind)
	return 0
}
