package logbridge_test

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/smithy-go/logging"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/kube-sunset/sunset/internal/logbridge"
)

// logger is a logger at level without timestamps, and a function that
// returns what it wrote since last called, one string a line.
func logger(level zerolog.Level) (zerolog.Logger, func() []string) {
	var buf bytes.Buffer
	return zerolog.New(&buf).Level(level), func() []string {
		out := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		buf.Reset()
		return out
	}
}

// setKlog routes klog, which only has process-global setters, to l at
// the verbosity of l's level, for the test's length.
func setKlog(t *testing.T, l zerolog.Logger) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	require.NoError(t, fs.Set("v", strconv.Itoa(logbridge.KlogVerbosity(l.GetLevel()))))
	klog.SetSlogLogger(logbridge.KlogLogger(l))
	t.Cleanup(func() { klog.ClearLogger(); require.NoError(t, fs.Set("v", "0")) })
}

// klog's Info and V(1) are info, V(2) debug; a Warning is a warning,
// though klog hands it to its logger as info; structured values and
// errors become fields, the error under Sunset's "error".
func TestKlogLevelsAndFields(t *testing.T) {
	l, lines := logger(zerolog.DebugLevel)
	setKlog(t, l)
	klog.Infof("Adding GroupVersion %s %s to ResourceManager", "sunset.dev", "v1")
	klog.V(1).Info("v1")
	klog.V(2).Info("v2")
	klog.V(5).Info("v5 is past debug's verbosity")
	klog.Warningf("Unable to get configmap/%s", "extension-apiserver-authentication")
	klog.InfoS("Starting controller", "name", "client-ca", "workers", 1)
	klog.ErrorS(errors.New("connection refused"), "Failed to watch", "resource", "configmaps")
	klog.Background().WithName("reflector").V(3).Info("contextual", "n", 2)
	require.Equal(t, []string{
		`{"level":"info","library":"klog","message":"Adding GroupVersion sunset.dev v1 to ResourceManager"}`,
		`{"level":"info","library":"klog","message":"v1"}`,
		`{"level":"debug","library":"klog","message":"v2"}`,
		`{"level":"warn","library":"klog","message":"Unable to get configmap/extension-apiserver-authentication"}`,
		`{"level":"info","library":"klog","name":"client-ca","workers":1,"message":"Starting controller"}`,
		`{"level":"error","library":"klog","error":"connection refused","resource":"configmaps","message":"Failed to watch"}`,
		`{"level":"debug","library":"klog","logger":"reflector","n":2,"message":"contextual"}`,
	}, lines())
}

// At info, klog's V(1) and above are not even formatted: klog's own
// verbosity drops them, as a Kubernetes component's default does.
func TestKlogAtInfoDropsVerbose(t *testing.T) {
	l, lines := logger(zerolog.InfoLevel)
	setKlog(t, l)
	require.False(t, klog.V(1).Enabled())
	klog.V(1).Info("v1")
	klog.Error("broken")
	require.Equal(t, []string{`{"level":"error","library":"klog","message":"broken"}`}, lines())
}

// Groups and attributes of an slog logger become dotted fields; records
// under the floor are dropped whatever the logger's level.
func TestSlogGroupsAndFloor(t *testing.T) {
	l, lines := logger(zerolog.TraceLevel)
	s := logbridge.Slog(l, logbridge.GoogleCloud, slog.LevelInfo)
	s.Debug("request", "body", "an audit event")
	s.With("client", "pubsub").WithGroup("rpc").Warn("retrying", "attempt", 2, slog.Group("status", "code", 14))
	require.Equal(t, []string{
		`{"level":"warn","library":"google-cloud-go","client":"pubsub","rpc.attempt":2,"rpc.status.code":14,"message":"retrying"}`,
	}, lines())
}

// gRPC's info and warnings are debug, its errors errors; AWS's warnings
// are warnings; kafka-go's lines lose their newline.
func TestGRPCAWSAndPrintf(t *testing.T) {
	l, lines := logger(zerolog.DebugLevel)
	g := logbridge.GRPCLogger(l)
	g.Infof("[core] Channel #%d created", 1)
	g.Warningln("[transport] closing:", "EOF")
	g.Errorf("[core] failed: %v", "boom")
	require.True(t, g.V(0))
	require.False(t, g.V(2))
	logbridge.AWSLogger(l).Logf(logging.Warn, "Response has no supported checksum. Not validating response payload.")
	logbridge.Printf(l, logbridge.KafkaGo, zerolog.WarnLevel)("kafka: %s\n", "connection refused")
	require.Equal(t, []string{
		`{"level":"debug","library":"grpc","message":"[core] Channel #1 created"}`,
		`{"level":"debug","library":"grpc","message":"[transport] closing: EOF"}`,
		`{"level":"error","library":"grpc","message":"[core] failed: boom"}`,
		`{"level":"warn","library":"aws-sdk-go-v2","message":"Response has no supported checksum. Not validating response payload."}`,
		`{"level":"warn","library":"kafka-go","message":"kafka: connection refused"}`,
	}, lines())

	l, lines = logger(zerolog.InfoLevel)
	logbridge.GRPCLogger(l).Info("hidden")
	logbridge.AWSLogger(l).Logf(logging.Debug, "hidden")
	logbridge.Printf(l, logbridge.KafkaGo, zerolog.DebugLevel)("hidden")
	require.Equal(t, []string{""}, lines())
}
