package logbridge

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/smithy-go/logging"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/grpclog"
)

// KlogLogger is the logger for klog.SetSlogLogger: klog's lines through l,
// its warnings as warnings and V(n) at the level Level gives -n.
func KlogLogger(l zerolog.Logger) *slog.Logger {
	return slog.New(&handler{l: l.With().Str(Field, Klog).Logger(), floor: slog.Level(-100), klog: true})
}

// KlogVerbosity is klog's -v for a logger at level: klog drops a V(n)
// line above it before any logger sees it. Info keeps klog's default, 0,
// as Kubernetes components do (client-go's V(1) is a line per feature
// gate at every start); debug shows up to V(4), V(1) as info and V(2) on
// as debug (Level); trace up to V(6), where client-go logs each request's
// URL and status. It stops there: from V(7) on client-go logs request
// headers and bodies, which hold credentials (a TokenReview's token).
func KlogVerbosity(level zerolog.Level) int {
	switch {
	case level <= zerolog.TraceLevel:
		return 6
	case level <= zerolog.DebugLevel:
		return 4
	default:
		return 0
	}
}

// GRPCLogger is the logger for grpclog.SetLoggerV2. gRPC's own default
// shows errors only, so its info and warnings (connection attempts and
// state changes, which the GKE source reports in its own words) are at
// debug here, and its errors errors. Fatal logs, then exits as gRPC
// expects.
func GRPCLogger(l zerolog.Logger) grpclog.LoggerV2 {
	return grpcLogger{l: l.With().Str(Field, GRPC).Logger()}
}

type grpcLogger struct{ l zerolog.Logger }

// log writes what text returns at level, formatting it only when a line
// at level is wanted.
func (g grpcLogger) log(level zerolog.Level, text func() string) {
	if e := g.l.WithLevel(level); e != nil {
		e.Msg(strings.TrimSuffix(text(), "\n"))
	}
}

// Info and the other methods below implement grpclog.LoggerV2.
func (g grpcLogger) Info(args ...any) {
	g.log(zerolog.DebugLevel, func() string { return fmt.Sprint(args...) })
}

func (g grpcLogger) Infoln(args ...any) {
	g.log(zerolog.DebugLevel, func() string { return fmt.Sprintln(args...) })
}

func (g grpcLogger) Infof(format string, args ...any) {
	g.log(zerolog.DebugLevel, func() string { return fmt.Sprintf(format, args...) })
}

func (g grpcLogger) Warning(args ...any) {
	g.log(zerolog.DebugLevel, func() string { return fmt.Sprint(args...) })
}

func (g grpcLogger) Warningln(args ...any) {
	g.log(zerolog.DebugLevel, func() string { return fmt.Sprintln(args...) })
}

func (g grpcLogger) Warningf(f string, args ...any) {
	g.log(zerolog.DebugLevel, func() string { return fmt.Sprintf(f, args...) })
}

func (g grpcLogger) Error(args ...any) {
	g.log(zerolog.ErrorLevel, func() string { return fmt.Sprint(args...) })
}

func (g grpcLogger) Errorln(args ...any) {
	g.log(zerolog.ErrorLevel, func() string { return fmt.Sprintln(args...) })
}

func (g grpcLogger) Errorf(format string, args ...any) {
	g.log(zerolog.ErrorLevel, func() string { return fmt.Sprintf(format, args...) })
}

func (g grpcLogger) Fatal(args ...any)                 { g.fatal(fmt.Sprint(args...)) }
func (g grpcLogger) Fatalln(args ...any)               { g.fatal(fmt.Sprintln(args...)) }
func (g grpcLogger) Fatalf(format string, args ...any) { g.fatal(fmt.Sprintf(format, args...)) }

func (g grpcLogger) fatal(msg string) {
	g.l.Error().Msg(strings.TrimSuffix(msg, "\n"))
	os.Exit(1)
}

// V reports whether gRPC's verbose info of verbosity v is wanted: its
// own default is 0; trace shows up to 2.
func (g grpcLogger) V(v int) bool {
	if g.l.GetLevel() <= zerolog.TraceLevel {
		return v <= 2
	}
	return v <= 0
}

// AWSLogger is the logger for the AWS SDK's configuration (aws.Config's
// Logger, config.WithLogger): its warnings as warnings, its debug lines
// (the request and response logging that ClientLogMode turns on, which
// Sunset leaves off) at debug.
func AWSLogger(l zerolog.Logger) logging.Logger {
	return awsLogger{l: l.With().Str(Field, AWS).Logger()}
}

type awsLogger struct{ l zerolog.Logger }

// Logf implements logging.Logger.
func (a awsLogger) Logf(c logging.Classification, format string, v ...any) {
	level := zerolog.DebugLevel
	if c == logging.Warn {
		level = zerolog.WarnLevel
	}
	if e := a.l.WithLevel(level); e != nil {
		e.Msg(strings.TrimSuffix(fmt.Sprintf(format, v...), "\n"))
	}
}

// Printf is a printf-like function that logs through l at level, with
// Field set to library: kafka-go's Logger and ErrorLogger take one (as
// kafka.LoggerFunc).
func Printf(l zerolog.Logger, library string, level zerolog.Level) func(format string, args ...any) {
	l = l.With().Str(Field, library).Logger()
	return func(format string, args ...any) {
		if e := l.WithLevel(level); e != nil {
			e.Msg(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n"))
		}
	}
}
