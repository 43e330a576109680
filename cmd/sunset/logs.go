package main

import (
	"flag"
	"strconv"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"

	"github.com/kube-sunset/sunset/internal/logbridge"
)

// routeLibraryLogs writes what klog (k8s.io/apiserver, client-go) and
// gRPC (under the Google Cloud clients) log through logger, in Sunset's
// format and at its level. Both libraries offer only process-global
// setters, and main is the one place that touches process-global state:
// the app package stays free of it so that tests run several servers in
// one process. serve calls it once, before the server is built, since
// k8s.io/apiserver logs while it is; publish-scan, a workload that logs
// JSON too, before it scans. The AWS SDK, the Google Cloud
// clients' own logger and kafka-go take their loggers where app builds
// their clients.
func routeLibraryLogs(logger zerolog.Logger) {
	// klog drops V(n) lines above its own -v before any logger sees
	// them; the flag set is the only way to set it.
	var klogFlags flag.FlagSet
	klog.InitFlags(&klogFlags)
	_ = klogFlags.Set("v", strconv.Itoa(logbridge.KlogVerbosity(logger.GetLevel())))
	klog.SetSlogLogger(logbridge.KlogLogger(logger))
	// gRPC reads its logger unsynchronised: it must be set before any
	// gRPC client exists, which holds here.
	grpclog.SetLoggerV2(logbridge.GRPCLogger(logger))
}
