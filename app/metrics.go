package app

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/kube-sunset/sunset/store"
)

// registerStoreMetrics exposes badger's size and the room left on its
// filesystem, for the disk-nearly-full alert.
func registerStoreMetrics(reg prometheus.Registerer, st *store.Store, dir string) {
	f := promauto.With(reg)
	for _, kind := range []string{"lsm", "vlog"} {
		f.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "sunset_store_size_bytes",
			Help:        "Bytes badger uses on disk, by kind: lsm (the counts) and vlog (the value log).",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 {
			lsm, vlog := st.Size()
			if kind == "lsm" {
				return float64(lsm)
			}
			return float64(vlog)
		})
	}
	statfs := func(free bool) float64 {
		var fs syscall.Statfs_t
		if err := syscall.Statfs(dir, &fs); err != nil {
			return 0
		}
		if free {
			return float64(fs.Bavail) * float64(fs.Bsize)
		}
		return float64(fs.Blocks) * float64(fs.Bsize)
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sunset_store_filesystem_free_bytes",
		Help: "Bytes available to Sunset on the filesystem of its data directory.",
	}, func() float64 { return statfs(true) })
	f.NewCounterFunc(prometheus.CounterOpts{
		Name: "sunset_store_clients_overflow_total",
		Help: "Requests counted under client \"other\" because their API already had max-clients-per-node-hour clients in that node and hour.",
	}, func() float64 { return float64(st.FoldedClients()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sunset_store_filesystem_size_bytes",
		Help: "Size of the filesystem of the data directory, in bytes.",
	}, func() float64 { return statfs(false) })
}
