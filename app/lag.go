package app

import (
	"github.com/prometheus/client_golang/prometheus"
)

// sourceLagDesc is how far behind the clock each managed cluster's newest
// event is; the sources tell it their newest event's time.
var sourceLagDesc = prometheus.NewDesc("sunset_source_lag_seconds",
	"Now minus the time of the newest event a managed-cluster source (eks, gke) has read, per cluster, or since Sunset started until the first; it grows while the source reads nothing.",
	[]string{"source", "cluster"}, nil)
