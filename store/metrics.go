package store

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the store's own: its commits, its size, the room left on its
// filesystem (for the disk-nearly-full alert), what the disk reserve
// refused and what maintenance deleted.
type metrics struct {
	commitDuration prometheus.Histogram
	commitErrors   prometheus.Counter
}

// newMetrics registers the store's metrics on reg; a nil reg gives working
// but unregistered metrics.
func (s *Store) newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		commitDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "sunset_store_commit_duration_seconds",
			Help:    "Time to commit one group of requests to badger, fsync included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		commitErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "sunset_store_commit_errors_total",
			Help: "Commits to badger that failed; their senders got an error.",
		}),
	}
	if reg == nil {
		return m
	}
	for _, kind := range []string{"lsm", "vlog"} {
		f.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "sunset_store_size_bytes",
			Help:        "Bytes badger uses on disk, by kind: lsm (the counts) and vlog (the value log).",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 {
			lsm, vlog := s.Size()
			if kind == "lsm" {
				return float64(lsm)
			}
			return float64(vlog)
		})
	}
	statfs := func(free bool) float64 {
		fs, err := s.Filesystem()
		if free {
			return float64(fs.Free)
		}
		if err != nil {
			return 0
		}
		return float64(fs.Size)
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sunset_store_filesystem_free_bytes",
		Help: "Bytes available to Sunset on the filesystem of its data directory.",
	}, func() float64 { return statfs(true) })
	f.NewCounterFunc(prometheus.CounterOpts{
		Name: "sunset_store_clients_overflow_total",
		Help: "Requests counted under client \"other\" because their API already had max-clients-per-node-hour clients in that node and hour.",
	}, func() float64 { return float64(s.FoldedClients()) })
	f.NewCounterFunc(prometheus.CounterOpts{
		Name: "sunset_store_clusters_overflow_total",
		Help: "Requests counted under cluster \"other\" because the store already kept its maximum of clusters.",
	}, func() float64 { return float64(s.FoldedClusters()) })
	f.NewCounterFunc(prometheus.CounterOpts{
		Name: "sunset_store_nodes_overflow_total",
		Help: "Requests counted under node \"other\" because their cluster already had the store's maximum of apiservers.",
	}, func() float64 { return float64(s.FoldedNodes()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sunset_store_filesystem_size_bytes",
		Help: "Size of the filesystem of the data directory, in bytes.",
	}, func() float64 { return statfs(false) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sunset_store_disk_reserve_bytes",
		Help: "Free space the store keeps on its filesystem for badger; below it, writes are refused.",
	}, func() float64 { return float64(s.Reserve()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sunset_store_disk_full",
		Help: "1 while the data directory's filesystem has less free space than the reserve: batches get 503, Kafka and followed files pause.",
	}, func() float64 {
		if s.CheckSpace() != nil {
			return 1
		}
		return 0
	})
	f.NewCounterFunc(prometheus.CounterOpts{
		Name: "sunset_store_writes_refused_total",
		Help: "Commits refused, or failed, for lack of disk space; their senders retry.",
	}, func() float64 { return float64(s.Refused()) })
	f.NewCounterFunc(prometheus.CounterOpts{
		Name: "sunset_store_expired_records_deleted_total",
		Help: "Records past the retention period that maintenance deleted, so that compactions free their space.",
	}, func() float64 { return float64(s.Swept()) })
	return m
}
